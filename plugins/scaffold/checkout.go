package scaffold

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
)

// BuildCommand is the command that builds a scaffolded plugin in its directory.
func BuildCommand(name string) string {
	return "GOOS=wasip1 GOARCH=wasm go build -buildmode=c-shared -o " + name + ".wasm ."
}

// ShellQuote quotes s for a POSIX shell when it needs it.
func ShellQuote(s string) string {
	if s != "" && strings.Trim(s, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_./~+:@") == "" {
		return s
	}
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// KnownCheckout is the minfer checkout a scaffold outside it points at: the one the
// working directory lies in, else the one this binary was built from (its source
// path, known unless it was built with -trimpath); "" when neither is known.
func KnownCheckout() string {
	if wd, err := os.Getwd(); err == nil {
		for d := wd; ; d = filepath.Dir(d) {
			if _, err := MinferCheckout(d); err == nil {
				return d
			}
			if filepath.Dir(d) == d {
				break
			}
		}
	}
	if _, file, _, ok := runtime.Caller(0); ok && filepath.IsAbs(file) {
		d := filepath.Dir(filepath.Dir(filepath.Dir(file))) // plugins/scaffold/checkout.go
		if _, err := MinferCheckout(d); err == nil {
			return d
		}
	}
	return ""
}
