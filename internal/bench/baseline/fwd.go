// Package baseline holds the evaluation suite's reference datapaths, measured in the same
// topology as xupfd: the bare XDP forwarder (MAC rewrite and redirect, the practical ceiling
// of any XDP datapath on the machine). The other baseline, Linux's own IP forwarding, needs
// no program: it is the topology with no XDP on the DUT.
package baseline

import (
	"errors"
	"fmt"
	"net"

	"github.com/cilium/ebpf"
	"github.com/cilium/ebpf/link"
)

// Forwarder is the bare XDP forwarder attached to one interface.
type Forwarder struct {
	objs fwdObjects
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
	if len(opts.NextHop) != 6 || len(opts.OutMAC) != 6 {
		return nil, errors.New("bare forwarder: the next hop and the egress interface need Ethernet addresses")
	}
	f := &Forwarder{}
	if err := loadFwdObjects(&f.objs, nil); err != nil {
		return nil, fmt.Errorf("bare forwarder: load: %w", err)
	}
	cfg := fwdFwdCfg{Ifindex: uint32(opts.Out)}
	copy(cfg.Dst[:], opts.NextHop)
	copy(cfg.Src[:], opts.OutMAC)
	if err := errors.Join(f.objs.FwdConfig.Put(uint32(0), cfg),
		f.objs.FwdPorts.Put(uint32(0), uint32(opts.Out))); err != nil {
		f.objs.Close()
		return nil, fmt.Errorf("bare forwarder: configure: %w", err)
	}
	return f, nil
}

// Attach attaches the forwarder to the interface in, natively.
func (f *Forwarder) Attach(in int) error {
	l, err := link.AttachXDP(link.XDPOptions{Program: f.objs.XupfBenchFwd, Interface: in, Flags: link.XDPDriverMode})
	if err != nil {
		return fmt.Errorf("bare forwarder: attach to interface %d: %w", in, err)
	}
	f.link = l
	return nil
}

// Program is the forwarder's XDP program.
func (f *Forwarder) Program() *ebpf.Program { return f.objs.XupfBenchFwd }

// Close detaches and unloads the forwarder.
func (f *Forwarder) Close() error {
	var errs []error
	if f.link != nil {
		errs = append(errs, f.link.Close())
	}
	return errors.Join(append(errs, f.objs.Close())...)
}
