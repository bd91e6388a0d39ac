//go:build !linux

package process

import (
	"os/exec"
	"syscall"
)

// orphanKill starts the plugin in its own process group (so killGroup reaches the
// processes it starts). Killing the plugin when the host dies has no portable
// equivalent of Linux's Pdeathsig outside Linux; Close still kills the group.
func orphanKill(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
