package cpu

import (
	"bufio"
	"bytes"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

var (
	physOnce  sync.Once
	physCores int
)

// PhysicalCores is the number of physical cores this process may use: on Linux the
// distinct (package, core) pairs of the online CPUs in sysfs (or /proc/cpuinfo), capped
// by runtime.NumCPU (which honours the affinity mask); elsewhere runtime.NumCPU. Matrix
// products are bound by memory and integer units, so a core's second hyper-thread adds
// little and one goroutine per physical core is the default.
func PhysicalCores() int {
	physOnce.Do(func() {
		n := runtime.NumCPU()
		p := linuxPhysicalCores()
		if p > 0 && p < n {
			n = p
		}
		physCores = max(n, 1)
	})
	return physCores
}

func linuxPhysicalCores() int {
	if runtime.GOOS != "linux" {
		return 0
	}
	if n := sysfsCores("/sys/devices/system/cpu"); n > 0 {
		return n
	}
	data, err := os.ReadFile("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	return cpuinfoCores(data)
}

// sysfsCores counts distinct (physical_package_id, core_id) pairs under dir/cpuN/topology.
func sysfsCores(dir string) int {
	cpus, err := filepath.Glob(filepath.Join(dir, "cpu[0-9]*"))
	if err != nil {
		return 0
	}
	seen := map[[2]int]bool{}
	for _, c := range cpus {
		if on, err := os.ReadFile(filepath.Join(c, "online")); err == nil && strings.TrimSpace(string(on)) == "0" {
			continue
		}
		core, err1 := readInt(filepath.Join(c, "topology", "core_id"))
		pkg, err2 := readInt(filepath.Join(c, "topology", "physical_package_id"))
		if err1 != nil || err2 != nil {
			continue
		}
		seen[[2]int{pkg, core}] = true
	}
	return len(seen)
}

func readInt(path string) (int, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, err
	}
	return strconv.Atoi(strings.TrimSpace(string(b)))
}

// cpuinfoCores counts distinct ("physical id", "core id") pairs of /proc/cpuinfo.
func cpuinfoCores(data []byte) int {
	seen := map[[2]string]bool{}
	var phys, core string
	flush := func() {
		if core != "" {
			seen[[2]string{phys, core}] = true
		}
		phys, core = "", ""
	}
	sc := bufio.NewScanner(bytes.NewReader(data))
	for sc.Scan() {
		line := sc.Text()
		if strings.TrimSpace(line) == "" {
			flush()
			continue
		}
		k, v, ok := strings.Cut(line, ":")
		if !ok {
			continue
		}
		switch strings.TrimSpace(k) {
		case "physical id":
			phys = strings.TrimSpace(v)
		case "core id":
			core = strings.TrimSpace(v)
		}
	}
	flush()
	return len(seen)
}
