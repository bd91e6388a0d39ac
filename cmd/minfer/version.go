package main

import (
	"context"
	"fmt"
	"runtime"
	"runtime/debug"

	"github.com/minfer/minfer/sdk"
)

func init() {
	register(&command{name: "version", summary: "print minfer's version, the Go toolchain and the plugin ABI", run: runVersion})
}

const versionUsage = `
Usage: minfer version

Prints the module version (or the VCS revision of a development build), the Go
toolchain, the platform and the plugin ABI version the host speaks.

Example:
  minfer version
`

func runVersion(ctx context.Context, m *Main, args []string) error {
	fs := m.newFlagSet("version", versionUsage)
	rest, err := parseFlags(fs, args)
	if err != nil {
		return err
	}
	if len(rest) > 0 {
		return usagef("version: unexpected argument %q", rest[0])
	}
	v, rev := "(devel)", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && len(s.Value) >= 12 {
				rev = " " + s.Value[:12]
			}
		}
	}
	fmt.Fprintf(m.Stdout, "minfer %s%s (%s, %s/%s), plugin ABI v%d.%d\n", v, rev, runtime.Version(), runtime.GOOS, runtime.GOARCH, sdk.ABIMajor, sdk.ABIMinor)
	return nil
}
