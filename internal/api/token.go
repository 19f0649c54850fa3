package api

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// MinTokenLen is the shortest token accepted: 128 bits as hex. The tokens xupfd makes are
// 256 bits (64 hex digits).
const MinTokenLen = 32

// maxTokenFile bounds what is read of a token file; a token is one short line.
const maxTokenFile = 4 << 10

// ReadToken returns the API token held in the file at path: its content without surrounding
// whitespace. xupfctl reads it too. The error says what to fix.
func ReadToken(path string) (string, error) {
	f, err := os.Open(path)
	if err != nil {
		return "", tokenFileError(path, err)
	}
	defer f.Close()
	return readToken(f, path)
}

// readToken reads the token of the open file f, named path.
func readToken(f *os.File, path string) (string, error) {
	data, err := io.ReadAll(io.LimitReader(f, maxTokenFile+1))
	if err != nil {
		return "", fmt.Errorf("API token file %s: %w", path, err)
	}
	if len(data) > maxTokenFile {
		return "", fmt.Errorf("API token file %s is larger than %d bytes; it must hold one token", path, maxTokenFile)
	}
	token := strings.TrimSpace(string(data))
	if err := checkToken(token); err != nil {
		return "", fmt.Errorf("API token file %s: %w", path, err)
	}
	return token, nil
}

// tokenFileError says how to get at a token file that cannot be opened.
func tokenFileError(path string, err error) error {
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return fmt.Errorf("API token file %s does not exist; xupfd creates it on its first start "+
			"(api_token_file in its configuration); point --token-file or XUPF_TOKEN_FILE at it", path)
	case errors.Is(err, fs.ErrPermission):
		return fmt.Errorf("API token file %s cannot be read by this user; run as its owner "+
			"(e.g. with sudo), or use a copy readable only by you through --token-file or XUPF_TOKEN_FILE", path)
	}
	return fmt.Errorf("API token file %s: %w", path, err)
}

// checkToken accepts a token of at least MinTokenLen characters of RFC 6750's token68 set,
// which is what can follow "Bearer " in a header.
func checkToken(token string) error {
	if len(token) < MinTokenLen {
		return fmt.Errorf("the token is %d characters long; it needs at least %d (remove the file and restart xupfd to get a new one)",
			len(token), MinTokenLen)
	}
	// token68: the characters below, then "=" only at the end.
	if i := strings.IndexFunc(strings.TrimRight(token, "="), func(r rune) bool { return !isToken68(r) }); i >= 0 {
		return fmt.Errorf("the token has a character (at offset %d) that a bearer token cannot hold; use letters, digits and -._~+/ only, and = only at the end", i)
	}
	return nil
}

func isToken68(r rune) bool {
	return r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-._~+/", r)
}

// LoadOrCreateToken returns the token in the file at path, first creating the file (mode
// 0600, and its directory, mode 0700, when missing) with a new random token when it does not
// exist; created says whether it did. A file that group or others may read or write, or that
// another user owns, is refused: anyone who can read the token owns the UPF.
func LoadOrCreateToken(path string) (token string, created bool, err error) {
	created, err = createToken(path)
	if err != nil {
		return "", false, err
	}
	// Checked and read through one descriptor, not followed through a symbolic link: the
	// file read is the file checked.
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW, 0)
	if errors.Is(err, syscall.ELOOP) {
		return "", false, fmt.Errorf("API token file %s is a symbolic link; point api_token_file at the file itself", path)
	}
	if err != nil {
		return "", false, tokenFileError(path, err)
	}
	defer f.Close()
	info, err := f.Stat()
	if err != nil {
		return "", false, fmt.Errorf("API token file %s: %w", path, err)
	}
	if !info.Mode().IsRegular() {
		return "", false, fmt.Errorf("API token file %s is not a regular file; point api_token_file at a file", path)
	}
	if perm := info.Mode().Perm(); perm&0o077 != 0 {
		return "", false, fmt.Errorf("API token file %s has mode %04o: group or others may use it; "+
			"run `chmod 600 %s`, or remove it and restart xupfd to get a new token", path, perm, path)
	}
	// A file someone else owns (planted in a shared directory, say) holds a token they know.
	if st, ok := info.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Geteuid() {
		return "", false, fmt.Errorf("API token file %s belongs to uid %d, not to xupfd's (%d): its owner knows the token; "+
			"remove it and restart xupfd to get a new one, or `chown %d %s` if you trust it", path, st.Uid, os.Geteuid(), os.Geteuid(), path)
	}
	token, err = readToken(f, path)
	return token, created, err
}

// createToken writes a new token to path unless the file exists. O_EXCL makes two daemons
// started at once agree on one token.
func createToken(path string) (bool, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return false, fmt.Errorf("API token file %s: create its directory: %w", path, err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("API token file %s: %w", path, err)
	}
	var raw [32]byte
	_, _ = rand.Read(raw[:]) // crypto/rand.Read never fails
	_, err = f.WriteString(hex.EncodeToString(raw[:]) + "\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path) // a half-written token would be refused at every later start
		return false, fmt.Errorf("API token file %s: write: %w", path, err)
	}
	return true, nil
}
