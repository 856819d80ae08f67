package rusage

import (
	"os"
	"strconv"
	"strings"
	"testing"
)

// TestRusageReportsThePeakRSSInBytes compares Self's peak with the
// kernel's own account of it (VmHWM in /proc/self/status, in KiB): a unit
// mistake shows as a factor of 1024 either way.
func TestRusageReportsThePeakRSSInBytes(t *testing.T) {
	ballast := make([]byte, 64<<20)
	for i := range ballast {
		ballast[i] = byte(i) // touch every page, so the peak counts them
	}
	cpu, peak := Self()
	b, err := os.ReadFile("/proc/self/status")
	if err != nil {
		t.Skipf("no /proc/self/status to compare with: %v", err)
	}
	var hwmKiB int64 = -1
	for _, line := range strings.Split(string(b), "\n") {
		if f := strings.Fields(line); len(f) >= 2 && f[0] == "VmHWM:" {
			hwmKiB, _ = strconv.ParseInt(f[1], 10, 64)
		}
	}
	if hwmKiB <= 0 {
		t.Skip("/proc/self/status has no VmHWM")
	}
	want := hwmKiB * 1024
	if peak < want/2 || peak > want*2 {
		t.Errorf("Self: peak RSS %d bytes; the kernel's VmHWM is %d bytes", peak, want)
	}
	if peak < int64(len(ballast)) {
		t.Errorf("Self: peak RSS %d bytes is below the %d bytes this test touched", peak, len(ballast))
	}
	if cpu <= 0 {
		t.Errorf("Self: CPU seconds %v; this process has run", cpu)
	}
	ballast[0]++ // keep the ballast alive until after the reading
}
