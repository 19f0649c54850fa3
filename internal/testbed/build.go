package testbed

import (
	"bytes"
	"context"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
)

// modulePath is the module whose commands BuildBinaries builds.
const modulePath = "github.com/xupf/xupf"

// BuildBinaries builds xupfd and xupfctl from the module that contains the working directory
// into dir and returns their paths.
func BuildBinaries(ctx context.Context, dir string) (xupfd, xupfctl string, err error) {
	root, err := moduleRoot(ctx)
	if err != nil {
		return "", "", err
	}
	xupfd, xupfctl = filepath.Join(dir, "xupfd"), filepath.Join(dir, "xupfctl")
	for _, b := range []struct{ out, pkg string }{{xupfd, "./cmd/xupfd"}, {xupfctl, "./cmd/xupfctl"}} {
		cmd := exec.CommandContext(ctx, "go", "build", "-o", b.out, b.pkg)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			return "", "", fmt.Errorf("testbed: go build %s: %w\n%s", b.pkg, err, out)
		}
	}
	return xupfd, xupfctl, nil
}

// moduleRoot finds the directory of the xupf module from the working directory.
func moduleRoot(ctx context.Context) (string, error) {
	cmd := exec.CommandContext(ctx, "go", "list", "-m", "-f", "{{.Path}} {{.Dir}}")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return "", fmt.Errorf("testbed: find the module (run from inside the xupf repository): %w: %s", err, strings.TrimSpace(stderr.String()))
	}
	path, dir, ok := strings.Cut(strings.TrimSpace(string(out)), " ")
	if !ok || path != modulePath {
		return "", fmt.Errorf("testbed: the working directory is in module %q, not %s; run from inside the xupf repository", path, modulePath)
	}
	return dir, nil
}
