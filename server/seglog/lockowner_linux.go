package seglog

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"

	"golang.org/x/sys/unix"
)

// lockHolder returns the pid that holds a flock on f's file, from
// /proc/locks (Linux), or 0 when it cannot tell.
func lockHolder(f File) int {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return 0
	}
	// /proc/locks names a file as major:minor:inode, the device numbers
	// in hex: "1: FLOCK  ADVISORY  WRITE 4242 08:01:131 0 EOF".
	id := fmt.Appendf(nil, "%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	b, err := os.ReadFile("/proc/locks")
	if err != nil {
		return 0
	}
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		fields := bytes.Fields(sc.Bytes())
		if len(fields) < 6 || string(fields[1]) != "FLOCK" || !bytes.Equal(fields[5], id) {
			continue
		}
		if pid, err := strconv.Atoi(string(fields[4])); err == nil && pid > 0 {
			return pid
		}
	}
	return 0
}
