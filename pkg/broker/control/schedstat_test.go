package control_test

import (
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/streamcast/streamcast/pkg/broker/supervise"
)

// cpuWait is what this process's threads and the machine lost to waiting
// for a CPU, read from Linux's /proc. The neighbour benchmark reports the
// change over its timed loop beside the p99, because on a shared VM an
// ack's tail is often someone else's: a run whose steal is high measured
// the host, not the product.
type cpuWait struct {
	runQueue time.Duration // this process's threads, runnable but not running
	steal    time.Duration // every vCPU, runnable but the hypervisor ran another guest
}

// readCPUWait sums the run-queue wait of this process's live threads
// (supervise.ProcessCPU, as serve reads its migration worker's) and the
// machine's steal (/proc/stat's cpu line, field 8, in USER_HZ ticks of
// 10 ms). ok is false where the files are missing (not Linux, or no
// schedstats): the figures are then left out, never guessed.
func readCPUWait() (w cpuWait, ok bool) {
	_, waited, ok := supervise.ProcessCPU(os.Getpid())
	if !ok {
		return cpuWait{}, false
	}
	w.runQueue = waited
	b, err := os.ReadFile("/proc/stat")
	if err != nil {
		return cpuWait{}, false
	}
	line, _, _ := strings.Cut(string(b), "\n")
	f := strings.Fields(line)
	if len(f) < 9 || f[0] != "cpu" {
		return cpuWait{}, false
	}
	ticks, err := strconv.ParseInt(f[8], 10, 64)
	if err != nil {
		return cpuWait{}, false
	}
	w.steal = time.Duration(ticks) * 10 * time.Millisecond
	return w, true
}
