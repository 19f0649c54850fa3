// Package baseline holds the evaluation suite's reference datapaths, measured in the same
// topology as xupfd: the bare XDP forwarder (MAC rewrite and redirect, the practical ceiling
// of any XDP datapath on the machine) and the minimal GTP-U datapath (decapsulation or
// encapsulation with no lookup, what a UPF cannot do without). The other baseline, Linux's
// own IP forwarding, needs no program: it is the topology with no XDP on the DUT.
package baseline

import (
	"errors"
	"fmt"
	"io"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Forwarder is one of the reference programs, attached to one interface.
type Forwarder struct {
	prog *ebpf.Program
	objs io.Closer
	link link.Link
}

// ForwardOptions say where frames go: out of the interface Out (ifindex, in the caller's
// network namespace) whose address is OutMAC, to the next hop NextHop. The kernel resolves
// Out in the network namespace of the thread calling LoadForwarder, so call it from there.
type ForwardOptions struct {
	Out             int
	OutMAC, NextHop net.HardwareAddr
}

// LoadForwarder loads the bare forwarder without attaching it (Attach does; BPF_PROG_TEST_RUN
// can run it as it is).
func LoadForwarder(opts ForwardOptions) (*Forwarder, error) {
	if err := opts.check(); err != nil {
		return nil, fmt.Errorf("bare forwarder: %w", err)
	}
	var objs fwdObjects
	if err := loadFwdObjects(&objs, nil); err != nil {
		return nil, fmt.Errorf("bare forwarder: load: %w", err)
	}
	if err := opts.configure(objs.FwdConfig, objs.FwdPorts); err != nil {
		objs.Close()
		return nil, fmt.Errorf("bare forwarder: configure: %w", err)
	}
	return &Forwarder{prog: objs.XupfBenchFwd, objs: &objs}, nil
}

func (opts ForwardOptions) check() error {
	if len(opts.NextHop) != 6 || len(opts.OutMAC) != 6 {
		return errors.New("the next hop and the egress interface need Ethernet addresses")
	}
	return nil
}

// configure writes the egress of bpf/bench/fwd.h into its two maps.
func (opts ForwardOptions) configure(config, ports *ebpf.Map) error {
	cfg := fwdFwdCfg{Ifindex: uint32(opts.Out)}
	copy(cfg.Dst[:], opts.NextHop)
	copy(cfg.Src[:], opts.OutMAC)
	return errors.Join(config.Put(uint32(0), cfg), ports.Put(uint32(0), uint32(opts.Out)))
}

// Attach attaches the program to the interface in, natively.
func (f *Forwarder) Attach(in int) error {
	l, err := link.AttachXDP(link.XDPOptions{Program: f.prog, Interface: in, Flags: link.XDPDriverMode})
	if err != nil {
		return fmt.Errorf("baseline: attach to interface %d: %w", in, err)
	}
	f.link = l
	return nil
}

// Program is the XDP program.
func (f *Forwarder) Program() *ebpf.Program { return f.prog }

// Close detaches and unloads the program.
func (f *Forwarder) Close() error {
	var errs []error
	if f.link != nil {
		errs = append(errs, f.link.Close())
	}
	return errors.Join(append(errs, f.objs.Close())...)
}
