package main

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
)

// CPUShare is how the machine's CPU time was spent during a run, in
// percent of all CPUs (from /proc/stat, so it covers every process: server,
// clients and anything else). Steal is time the hypervisor gave the
// virtual CPUs to something else: on a VM whose host throttles it, a
// latency tail comes from there, not from the system under test.
type CPUShare struct {
	User   float64 `json:"user_pct"`
	System float64 `json:"system_pct"`
	Idle   float64 `json:"idle_pct"`
	IOWait float64 `json:"iowait_pct"`
	IRQ    float64 `json:"irq_pct"`
	Steal  float64 `json:"steal_pct"`
}

// cpuTimes are the cumulative counters of the "cpu" line of /proc/stat
// (user nice system idle iowait irq softirq steal), in clock ticks.
type cpuTimes [8]uint64

// parseCPUTimes reads the aggregate "cpu" line of a /proc/stat.
func parseCPUTimes(r io.Reader) (cpuTimes, error) {
	var t cpuTimes
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 || f[0] != "cpu" {
			continue
		}
		if len(f) < 9 {
			return t, fmt.Errorf("/proc/stat: short cpu line %q", sc.Text())
		}
		for i := range t {
			v, err := strconv.ParseUint(f[i+1], 10, 64)
			if err != nil {
				return t, fmt.Errorf("/proc/stat: cpu field %d: %w", i+1, err)
			}
			t[i] = v
		}
		return t, nil
	}
	if err := sc.Err(); err != nil {
		return t, err
	}
	return t, fmt.Errorf("/proc/stat: no cpu line")
}

// readCPUTimes reads /proc/stat; ok is false where there is none.
func readCPUTimes() (cpuTimes, bool) {
	f, err := os.Open("/proc/stat")
	if err != nil {
		return cpuTimes{}, false
	}
	defer f.Close()
	t, err := parseCPUTimes(f)
	return t, err == nil
}

// minShareTicks is the fewest clock ticks (all CPUs together) a share is
// computed from: /proc/stat counts in ticks of 10 ms, so a run of a few
// milliseconds sees none or a handful, and percentages of those say nothing
// (a 3,000-message test run once read "user 0 %, idle 75 %, irq 25 %").
const minShareTicks = 20

// share returns how the ticks between from and to were spent; ok is false
// when there were too few to tell (minShareTicks).
func (to cpuTimes) share(from cpuTimes) (s CPUShare, ok bool) {
	var d cpuTimes
	var total float64
	for i := range d {
		if to[i] >= from[i] {
			d[i] = to[i] - from[i]
		}
		total += float64(d[i])
	}
	if total < minShareTicks {
		return CPUShare{}, false
	}
	pct := func(v uint64) float64 { return 100 * float64(v) / total }
	return CPUShare{
		User: pct(d[0] + d[1]), System: pct(d[2]), Idle: pct(d[3]), IOWait: pct(d[4]),
		IRQ: pct(d[5] + d[6]), Steal: pct(d[7]),
	}, true
}

// procCPUSeconds returns the user+system CPU time process pid used so far
// (/proc/<pid>/stat fields 14 and 15, in 10 ms ticks: USER_HZ is 100).
func procCPUSeconds(pid int) (float64, bool) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, false
	}
	// The command name (field 2) is in parentheses and may hold spaces.
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, false
	}
	f := strings.Fields(string(b[i+1:])) // f[0] is field 3
	if len(f) < 13 {
		return 0, false
	}
	u, err1 := strconv.ParseUint(f[11], 10, 64)
	s, err2 := strconv.ParseUint(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, false
	}
	return float64(u+s) / 100, true
}
