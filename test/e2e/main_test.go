// Package e2e runs the real xupfd in a network-namespace testbed (internal/testbed) and checks
// the traffic that comes out of it. The tests need root; as any other user they skip.
package e2e

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/xupf/xupf/internal/testbed"
)

// Built once by TestMain; every test runs its own daemon from them.
var xupfdBin, xupfctlBin string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	if os.Geteuid() != 0 {
		return m.Run() // every test skips; nothing to build
	}
	dir, err := os.MkdirTemp("", "xupf-e2e-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e: temp dir:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	xupfdBin, xupfctlBin, err = testbed.BuildBinaries(ctx, dir)
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	return m.Run()
}
