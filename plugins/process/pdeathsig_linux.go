package process

import (
	"os/exec"
	"syscall"
)

// orphanKill starts the plugin in its own process group (so killGroup reaches the
// processes it starts: a shell script's children) and asks Linux to kill it if the
// host dies without Close (SIGKILL, a crash), so no plugin outlives its engine.
func orphanKill(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
}
