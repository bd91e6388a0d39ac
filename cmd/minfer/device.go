package main

import (
	"fmt"
	"sort"
	"strings"

	"github.com/minfer/minfer/core/backend/cpu"
	"github.com/minfer/minfer/core/backend/cuda"
	"github.com/minfer/minfer/core/config"
)

// setDevice applies a --device flag value ("" keeps the configuration's) and checks it.
func setDevice(cfg *config.Config, device string) error {
	if device == "" {
		return nil
	}
	switch device {
	case config.DeviceAuto, config.DeviceCPU, config.DeviceCUDA:
		cfg.Model.Device = device
		return nil
	}
	return usagef("--device %q: want auto, cpu or cuda", device)
}

// setCPUOrder applies a --cpu-order flag value ("" keeps the configuration's) and checks it.
func setCPUOrder(cfg *config.Config, order string) error {
	if order == "" {
		return nil
	}
	if _, err := cpu.ParseOrder(order); err != nil {
		return usagef("--cpu-order %q: want avx512 or avx2", order)
	}
	cfg.Model.CPUOrder = order
	return nil
}

// cudaSwitchHelp lists the CUDA backend's environment switches for a command's help:
// each specialised kernel path can be turned off to bisect a wrong result to one kernel.
func cudaSwitchHelp() string {
	sw := cuda.Switches()
	names := make([]string, 0, len(sw))
	for k := range sw {
		names = append(names, k)
	}
	sort.Strings(names)
	var b strings.Builder
	b.WriteString("\nCUDA environment switches (for bisecting and comparing kernel paths):\n")
	for _, k := range names {
		fmt.Fprintf(&b, "  %-24s %s\n", k, sw[k])
	}
	return b.String()
}
