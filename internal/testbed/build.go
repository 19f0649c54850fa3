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
	xupfd, xupfctl = filepath.Join(dir, "xupfd"), filepath.Join(dir, "xupfctl")
	for _, b := range []struct{ out, pkg string }{{xupfd, "./cmd/xupfd"}, {xupfctl, "./cmd/xupfctl"}} {
		if err := Build(ctx, b.out, b.pkg); err != nil {
			return "", "", err
		}
	}
	return xupfd, xupfctl, nil
}

// Build builds the package pkg of the module that contains the working directory into out,
// with the build tags tags: a test builds a second xupfd that differs from the first.
func Build(ctx context.Context, out, pkg string, tags ...string) error {
	root, err := moduleRoot(ctx)
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, "go", "build", "-tags", strings.Join(tags, ","), "-o", out, pkg)
	cmd.Dir = root
	if msg, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("testbed: go build -tags %q %s: %w\n%s", strings.Join(tags, ","), pkg, err, msg)
	}
	return nil
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
