package fibrilproc

import (
	"os/exec"
	"syscall"
)

// dieWithParent makes the kernel kill the server if the test process dies
// without stopping it (a panic, a kill), so no server outlives its tests.
func dieWithParent(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
}
