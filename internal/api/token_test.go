package api_test

import (
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/xupf/xupf/internal/api"
)

func TestLoadOrCreateToken(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "state")
	path := filepath.Join(dir, "api-token")
	token, created, err := api.LoadOrCreateToken(path)
	if err != nil || !created {
		t.Fatalf("first start: created %v, err %v", created, err)
	}
	if !regexp.MustCompile(`^[0-9a-f]{64}$`).MatchString(token) {
		t.Errorf("token %q is not 256 bits in hex", token)
	}
	for p, want := range map[string]os.FileMode{path: 0o600, dir: 0o700} {
		if info, err := os.Stat(p); err != nil || info.Mode().Perm() != want {
			t.Errorf("%s: mode %v (err %v), want %04o", p, info.Mode().Perm(), err, want)
		}
	}

	again, created, err := api.LoadOrCreateToken(path)
	if err != nil || created || again != token {
		t.Errorf("second start: token %q, created %v, err %v; want the first token, not created", again, created, err)
	}
	if read, err := api.ReadToken(path); err != nil || read != token {
		t.Errorf("ReadToken = %q, %v; want %q", read, err, token)
	}
	other, _, err := api.LoadOrCreateToken(filepath.Join(dir, "other"))
	if err != nil || other == token {
		t.Errorf("another file got token %q (err %v): tokens must be random", other, err)
	}
}

func TestLoadOrCreateTokenRefuses(t *testing.T) {
	write := func(t *testing.T, content string, mode os.FileMode) string {
		path := filepath.Join(t.TempDir(), "api-token")
		if err := os.WriteFile(path, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, mode); err != nil { // past the umask
			t.Fatal(err)
		}
		return path
	}
	good := strings.Repeat("a", 40) + "\n"
	for _, c := range []struct {
		name    string
		path    func(t *testing.T) string
		wantErr string
	}{
		{"readable by others", func(t *testing.T) string { return write(t, good, 0o644) }, "has mode 0644: group or others may use it; run `chmod 600"},
		{"writable by group", func(t *testing.T) string { return write(t, good, 0o620) }, "has mode 0620"},
		{"too short", func(t *testing.T) string { return write(t, "secret\n", 0o600) }, "the token is 6 characters long; it needs at least 32"},
		{"empty", func(t *testing.T) string { return write(t, "", 0o600) }, "the token is 0 characters long"},
		{"a space inside", func(t *testing.T) string { return write(t, strings.Repeat("a", 20)+" "+strings.Repeat("b", 20), 0o600) },
			"the token has a character (at offset 20) that a bearer token cannot hold"},
		{"too large", func(t *testing.T) string { return write(t, strings.Repeat("a", 5000), 0o600) }, "is larger than 4096 bytes"},
		{"a directory", func(t *testing.T) string { return t.TempDir() }, "is not a regular file"},
		{"= inside", func(t *testing.T) string { return write(t, strings.Repeat("a", 20)+"="+strings.Repeat("b", 20), 0o600) },
			"the token has a character (at offset 20)"},
		{"a symbolic link", func(t *testing.T) string {
			target := write(t, good, 0o600)
			link := filepath.Join(t.TempDir(), "api-token")
			if err := os.Symlink(target, link); err != nil {
				t.Fatal(err)
			}
			return link
		}, "is a symbolic link; point api_token_file at the file itself"},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, _, err := api.LoadOrCreateToken(c.path(t))
			if err == nil || !strings.Contains(err.Error(), c.wantErr) {
				t.Errorf("err = %v, want it to contain %q", err, c.wantErr)
			}
		})
	}
}

// A token file another user owns is refused even with mode 0600: its owner knows the token.
func TestLoadOrCreateTokenRefusesOtherOwner(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to give the file to another user")
	}
	path := filepath.Join(t.TempDir(), "api-token")
	if err := os.WriteFile(path, []byte(strings.Repeat("a", 64)), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(path, 65534, 65534); err != nil {
		t.Fatal(err)
	}
	_, _, err := api.LoadOrCreateToken(path)
	if want := "API token file " + path + " belongs to uid 65534, not to xupfd's (0): its owner knows the token"; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("err = %v, want it to contain %q", err, want)
	}
}

func TestReadTokenMissing(t *testing.T) {
	_, err := api.ReadToken("/nonexistent/api-token")
	want := "API token file /nonexistent/api-token does not exist; xupfd creates it on its first start " +
		"(api_token_file in its configuration); point --token-file or XUPF_TOKEN_FILE at it"
	if err == nil || err.Error() != want {
		t.Errorf("err = %v, want %q", err, want)
	}
}

// A token68 may end in "=" padding.
func TestTokenPaddingAccepted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "api-token")
	want := strings.Repeat("a", 40) + "=="
	if err := os.WriteFile(path, []byte(want+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if got, _, err := api.LoadOrCreateToken(path); err != nil || got != want {
		t.Errorf("LoadOrCreateToken = %q, %v; want %q", got, err, want)
	}
}
