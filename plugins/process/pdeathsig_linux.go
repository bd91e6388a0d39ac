package process

import (
	"os/exec"
	"syscall"
)

// orphanKill asks Linux to kill the plugin if the host dies without Close (SIGKILL,
// a crash), so no plugin outlives its engine.
func orphanKill(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
