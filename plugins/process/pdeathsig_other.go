//go:build !linux

package process

import "os/exec"

// orphanKill has no portable equivalent outside Linux; Close still kills the plugin.
func orphanKill(*exec.Cmd) {}
