// Package daemon is xupfd as a library: it loads and attaches the datapath, installs the
// configured sessions, serves the HTTP API and keeps the PFCP (N4) associations with SMFs.
// cmd/xupfd only wires flags and signals to it.
package daemon

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"sync"
	"time"

	"github.com/xupf/xupf/internal/api"
	"github.com/xupf/xupf/internal/buffer"
	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/config"
	"github.com/xupf/xupf/internal/datapath"
	"github.com/xupf/xupf/internal/gtpu"
	"github.com/xupf/xupf/internal/pfcp"
	"github.com/xupf/xupf/internal/sockbuf"
	"github.com/xupf/xupf/internal/state"
)

// Daemon is a running xupfd.
type Daemon struct {
	cfg      *config.Config
	log      *slog.Logger
	version  string
	started  time.Time
	dp       *datapath.Datapath
	attached []api.Interface
	// pinLock is New's claim on the bpffs directory; Close releases it.
	pinLock *datapath.PinLock
	// adopted says the bpffs directory held an earlier run's pins: a failed start leaves
	// them forwarding, where a failed first start removes what it made.
	adopted bool
	// store is the state file the PFCP node keeps its sessions in (state_dir).
	store *state.Store
	// apiSrv, httpLn and pfcpConn are made by New (see listen) and served by Run.
	apiSrv   *http.Server
	httpLn   net.Listener
	pfcpConn *net.UDPConn
	// pfcpNode answers the SMFs on pfcp_listen; Run serves it.
	pfcpNode *pfcp.Node
	// gtpu is the GTP-U signalling socket on each GTP-U address, made by New with the
	// datapath (which hands it Error Indications) and served by Run.
	gtpu *gtpu.Endpoint
	// buf keeps the packets of buffering FARs, which the datapath hands over; Run reads them.
	buf *buffer.Buffer
	// stopClock stops advancing the meters' user clock (qos_clock: user).
	stopClock func()
	// stopMTU stops keeping the return device's MTU with the interfaces' (kernel_n6).
	stopMTU func()
	// static are the configured sessions, installed by New.
	static staticSessions

	// The traffic classifier, configured through the API. classMu makes the Backend's class
	// methods atomic: a duplicate id is found before the Manager sees it, and a listing
	// never reads the counters of a class that is being deleted.
	classMu sync.RWMutex
	classes *classifier.Manager
	classDP classDatapath
}

// New claims the bpffs directory, opens the state file, binds the API and PFCP sockets, loads
// the datapath (taking over an earlier run's pinned maps and links), attaches it to the
// configured interfaces, installs the static sessions and restores the PFCP sessions of the
// state file. On error everything it did is undone, except that an earlier run's pins are
// left forwarding as they were.
//
// What can fail without touching the datapath comes first: another xupfd on the same pins,
// or a restart whose ports are taken, must fail before it changes anything a running (or
// crashed but still forwarding) instance owns.
//
// The *Daemon result is not named: `return nil, err` would clear it before the deferred Close
// runs.
func New(cfg *config.Config, log *slog.Logger, version string) (_ *Daemon, err error) {
	// Check the host first: a missing interface should not cost a datapath load and unload.
	for _, iface := range cfg.Interfaces {
		if err := checkForwarding(iface.Name); err != nil {
			return nil, err
		}
	}
	lock, err := datapath.LockPinPath(cfg.BPFFS)
	if err != nil {
		return nil, err
	}
	d := &Daemon{cfg: cfg, log: log, version: version, started: time.Now(), pinLock: lock, stopClock: func() {}, stopMTU: func() {}}
	defer func() {
		if err == nil {
			return
		}
		if cerr := d.close(!d.adopted); cerr != nil {
			log.Error("undo the start-up", "err", cerr)
		}
	}()
	if d.adopted, err = earlierRun(cfg); err != nil {
		return nil, err
	}
	if d.store, err = state.Open(cfg.StateDir, log, storeBuckets...); err != nil {
		return nil, err
	}
	if err := d.listen(); err != nil {
		return nil, err
	}
	dp, err := datapath.Load(datapath.Options{
		PinPath:        cfg.BPFFS,
		MaxSessions:    cfg.Limits.MaxSessions,
		MaxRuleSets:    cfg.Limits.MaxRuleSets,
		MaxSDFEntries:  cfg.Limits.MaxSDFEntries,
		DirectSlots:    cfg.Limits.DirectCacheSlots,
		GTPUAddrs:      cfg.GTPUAddresses,
		N3Interfaces:   n3Interfaces(cfg),
		UEAllowed:      ueAllowed(cfg),
		MeterAlgo:      meterAlgos[cfg.QoSAlgorithm],
		Clock:          meterClocks[cfg.QoSClock],
		MBRBurst:       cfg.QoSMBRBurst,
		PrivateRoutes:  cfg.Router.Mode == config.RouterPrivate,
		MaxRoutes:      cfg.Router.MaxRoutes,
		MaxRouteChunks: cfg.Router.MaxRouteChunks,
		MaxNexthops:    cfg.Router.MaxNexthops,
		FlowCache:      datapath.FlowCacheOptions{MaxFlows: cfg.FlowCache.MaxFlows, IdleTimeout: cfg.FlowCache.IdleTimeout, KernelN6: cfg.FlowCache.KernelN6},
		Spread:         spreadModes[cfg.UplinkSpread],
		SpreadCPUs:     cfg.UplinkSpreadCPUs,
		SpreadQueue:    cfg.UplinkSpreadQueue,
		// One session's PDR holds no more in the datapath than the session may in xupfd.
		BufferMaxPackets: cfg.BufferMaxPacketsPerSession,
		Logger:           log,
	})
	if err != nil {
		return nil, err
	}
	d.dp = dp
	if d.gtpu, err = gtpu.Listen(cfg.GTPUAddresses, cfg.GTPUErrorIndicationRate, log); err != nil {
		return nil, err
	}
	var node *pfcp.Node // the buffer notifies through it, and it sets the buffer's policies
	d.buf = buffer.New(dp, buffer.Limits{MaxPacketsPerSession: cfg.BufferMaxPacketsPerSession,
		MaxBytesPerSession: cfg.BufferMaxBytesPerSession, MaxBytes: cfg.BufferMaxBytes,
		MaxDuration: cfg.BufferMaxDuration}, func(k buffer.Key) { node.DownlinkData(k) }, log)
	node = newPFCPNode(cfg, dp, d.gtpu, d.buf, d.store, log)
	d.pfcpNode = node
	if cfg.QoSClock == config.ClockUser {
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() {
			defer close(done)
			dp.RunClock(ctx, datapath.UserClockPeriod)
		}()
		// Close waits for the clock's last write before the maps go.
		d.stopClock = func() { cancel(); <-done }
	}
	// Before Attach: the classes go into the classifier buffer and slots the earlier run's
	// program (in the pinned links until Attach) does not read, so the program Attach swaps
	// in classifies from its first packet. After a start that stopped partway through
	// attaching, the earlier programs may read both buffers: then once Attach (or Prune, for
	// the link of an interface no longer configured) has taken them over.
	d.initClassifier(dp)
	classesSet := false
	configureClasses := func() error {
		if classesSet || !dp.ClassesWritable() {
			return nil
		}
		classesSet = true
		return d.configureClasses()
	}
	if err := configureClasses(); err != nil {
		return nil, err
	}
	// Before the interfaces: this run's program takes over the return device's link while
	// the earlier program still runs in theirs, so its classes are in place for it too.
	if err := d.returnDevice(); err != nil {
		return nil, err
	}
	for _, iface := range cfg.Interfaces {
		a, err := dp.Attach(iface.Name, datapath.XDPMode(cfg.XDPMode), cfg.XDPFallback)
		if err != nil {
			return nil, err
		}
		if err := acceptLocal(iface.Name); err != nil {
			return nil, err
		}
		d.attached = append(d.attached, api.Interface{
			Name: a.Name, Ifindex: a.Ifindex, Roles: roleNames(iface.Roles), XDPMode: string(a.Mode),
		})
		log.Info("attached", "interface", a.Name, "ifindex", a.Ifindex, "roles", iface.Roles, "xdp_mode", a.Mode)
	}
	if err := configureClasses(); err != nil {
		return nil, err
	}
	if err := d.installRoutes(); err != nil {
		return nil, err
	}
	if err := d.restoreRoutes(); err != nil {
		return nil, err
	}
	// In private mode, the routes are all in now: the route table goes from the earlier run's
	// (or none) to them in one pass.
	if err := dp.Router().Ready(); err != nil {
		return nil, fmt.Errorf("route table: %w", err)
	}
	if d.static, err = installStatic(dp, cfg.Sessions); err != nil {
		return nil, err
	}
	res, err := node.Restore()
	if err != nil {
		return nil, err
	}
	log.Info("pfcp state", "restored", res.Restored, "sessions", res.Sessions, "associations", res.Associations,
		"recovery_time_stamp", res.RecoveryTimeStamp, "read_in", res.ReadIn, "installed_in", res.InstalledIn,
		"state_file", d.store.Path())
	if err := dp.Prune(); err != nil {
		return nil, fmt.Errorf("prune entries of an earlier run: %w", err)
	}
	if err := configureClasses(); err != nil {
		return nil, err
	}
	log.Info("datapath ready", "sessions", len(cfg.Sessions), "max_sessions", cfg.Limits.MaxSessions,
		"gtpu_addresses", cfg.GTPUAddresses, "bpffs", cfg.BPFFS)
	return d, nil
}

// n3Interfaces names the interfaces with the n3 role: the only ones GTP-U is accepted on.
func n3Interfaces(cfg *config.Config) []string {
	var names []string
	for _, ifc := range cfg.InterfacesWithRole(config.RoleN3) {
		names = append(names, ifc.Name)
	}
	return names
}

// roleNames are an interface's roles as the API shows them.
func roleNames(roles []config.Role) []string {
	names := make([]string, len(roles))
	for i, r := range roles {
		names[i] = string(r)
	}
	return names
}

// ueAllowed are the services of ue_to_upf_allowed, as the datapath takes them.
func ueAllowed(cfg *config.Config) []datapath.UEService {
	var out []datapath.UEService
	for _, s := range cfg.UEToUPFAllowed {
		out = append(out, datapath.UEService{Addr: s.Address, Protocol: config.UEToUPFProtocols[s.Protocol], Port: s.Port})
	}
	return out
}

// newPFCPNode returns the PFCP node the configuration describes, installing sessions in dp,
// sending End Markers through em (nil: none), buffering in bufs (nil: none) and keeping its
// state in st (nil: nowhere).
func newPFCPNode(cfg *config.Config, dp pfcp.Datapath, em pfcp.EndMarkerSender, bufs pfcp.BufferController,
	st *state.Store, log *slog.Logger) *pfcp.Node {
	return pfcp.NewNode(pfcp.Options{
		NodeID:                    cfg.PFCPNodeID,
		AllowedPeers:              cfg.PFCPAllowedPeers,
		PeerAddresses:             cfg.PFCPPeerAddresses,
		MaxAssociations:           cfg.Limits.MaxAssociations,
		MaxSessions:               pfcpRoom(cfg),
		MaxSessionsPerAssociation: cfg.Limits.MaxSessionsPerAssociation,
		SMFPeers:                  cfg.PFCPSMFPeers,
		HeartbeatInterval:         cfg.PFCPHeartbeatInterval,
		HeartbeatRetries:          cfg.PFCPHeartbeatRetries,
		DeleteSessionsOfLostPeers: cfg.PFCPLostPeerSessions == config.LostPeerDelete,
		Datapath:                  dp,
		Store:                     st,
		EndMarkers:                em,
		Buffers:                   bufs,
		Address:                   n4Address(cfg),
		GTPUAddrs:                 cfg.GTPUAddresses,
		UEPools:                   cfg.UEPools,
		UEPoolsOnly:               cfg.UEPoolsOnly,
		NetworkInstances:          cfg.NetworkInstances,
		AllowAnySource:            cfg.PFCPAllowAnySource,
		Logger:                    log,
	})
}

// pfcpRoom is the most PFCP sessions: what the static sessions leave of limits.max_sessions,
// or -1 (none) when they fill it.
func pfcpRoom(cfg *config.Config) int {
	if room := cfg.Limits.MaxSessions - len(cfg.Sessions); room > 0 {
		return room
	}
	return -1
}

// n4Address is the IPv4 address SMFs reach this UPF's PFCP endpoint at, for the UP F-SEID:
// pfcp_listen's host when it is one, else the Node ID when it is an address, else the first
// GTP-U address.
func n4Address(cfg *config.Config) netip.Addr {
	if ap, err := netip.ParseAddrPort(cfg.PFCPListen); err == nil && ap.Addr().Is4() && !ap.Addr().IsUnspecified() {
		return ap.Addr()
	}
	if a, err := netip.ParseAddr(cfg.PFCPNodeID); err == nil && a.Is4() {
		return a
	}
	return cfg.GTPUAddresses[0]
}

// listen builds the API server (creating its token file on first start) and binds its
// listener on http_listen and the PFCP socket on pfcp_listen.
func (d *Daemon) listen() error {
	srv, err := d.newAPIServer()
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", d.cfg.HTTPListen)
	if err != nil {
		return fmt.Errorf("http_listen %s: %w; free the port or set http_listen to another address", d.cfg.HTTPListen, err)
	}
	conn, err := listenPFCP(d.cfg.PFCPListen)
	if err != nil {
		ln.Close()
		return err
	}
	d.apiSrv, d.httpLn, d.pfcpConn = srv, ln, conn
	return nil
}

// Run serves the HTTP API and PFCP on the sockets New bound until ctx is done or one of them
// fails, then stops both and closes the sockets. It returns nil after a shutdown through ctx,
// else the failure.
func (d *Daemon) Run(ctx context.Context) error {
	srv, ln, conn := d.apiSrv, d.httpLn, d.pfcpConn
	ctx, stop := context.WithCancel(ctx)
	defer stop()
	httpErr := make(chan error, 1)
	go func() { httpErr <- serveAPI(srv, ln) }()
	pfcpErr := make(chan error, 1)
	go func() { pfcpErr <- d.pfcpNode.Serve(ctx, conn) }() // closes conn when ctx is done
	var gtpuDone sync.WaitGroup
	if d.gtpu != nil {
		gtpuDone.Go(func() {
			d.gtpu.Serve(ctx, func(_ netip.AddrPort, ei gtpu.ErrorIndication) bool {
				return d.pfcpNode.ErrorIndication(ei.TEID, ei.Peer)
			})
		})
		gtpuDone.Go(func() {
			err := d.dp.ReadUnknownTEIDs(ctx, func(u datapath.UnknownTEID) { d.gtpu.AnswerUnknownTEID(u.Local, u.Peer, u.TEID) })
			if err != nil {
				d.log.Error("unknown-TEID events: no more Error Indications are sent", "err", err)
			}
		})
	}
	var bufDone sync.WaitGroup
	if d.buf != nil {
		bufDone.Go(func() {
			if err := d.dp.ReadBuffered(ctx, d.buf.Add); err != nil {
				d.log.Error("buffered packets: no more are kept", "err", err)
			}
		})
		bufDone.Go(func() { d.buf.Run(ctx) })
	}
	d.log.Info("http api listening", "address", ln.Addr().String(), "tls", srv.TLSConfig != nil)
	d.log.Info("pfcp listening", "address", conn.LocalAddr().String(), "node_id", d.cfg.PFCPNodeID,
		"allowed_peers", d.cfg.PFCPAllowedPeers, "heartbeat_interval", d.cfg.PFCPHeartbeatInterval,
		"heartbeat_retries", d.cfg.PFCPHeartbeatRetries)

	var runErr error
	pfcpDone := false
	select {
	case err := <-httpErr:
		runErr = fmt.Errorf("http api: %w", err)
	case err := <-pfcpErr:
		pfcpDone = true
		if err == nil && ctx.Err() == nil {
			err = errors.New("the socket was closed")
		}
		if err != nil {
			runErr = fmt.Errorf("pfcp: %w", err)
		}
	case <-ctx.Done():
	}

	// Stop both: PFCP through ctx, the HTTP server by a graceful shutdown.
	stop()
	shutdownCtx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Shutdown(shutdownCtx); err != nil && !errors.Is(err, http.ErrServerClosed) && runErr == nil {
		runErr = fmt.Errorf("http api shutdown: %w", err)
	}
	if !pfcpDone {
		<-pfcpErr // Serve returns once its socket is closed
	}
	gtpuDone.Wait()
	bufDone.Wait()
	return runErr
}

// listenPFCP binds the PFCP UDP socket.
func listenPFCP(addr string) (*net.UDPConn, error) {
	udpAddr, err := net.ResolveUDPAddr("udp", addr)
	if err != nil {
		return nil, fmt.Errorf("pfcp_listen %s: %w", addr, err)
	}
	conn, err := net.ListenUDP("udp", udpAddr)
	if err != nil {
		return nil, fmt.Errorf("pfcp_listen %s: %w; free the port or set pfcp_listen to another address", addr, err)
	}
	if _, err := sockbuf.Receive(conn, pfcpReceiveBuffer); err != nil {
		conn.Close()
		return nil, fmt.Errorf("pfcp_listen %s: %w", addr, err)
	}
	return conn, nil
}

// pfcpReceiveBuffer holds about 4,000 requests arriving at once (see package sockbuf): the
// default held some 200, and each one dropped cost its SMF a retransmission timeout.
const pfcpReceiveBuffer = 4 << 20

// Close closes the sockets (unless Run has) and the state file and releases the datapath and
// the bpffs directory, leaving the pinned links and maps forwarding: the next xupfd takes
// them over, and Stop removes them.
func (d *Daemon) Close() error { return d.close(false) }

// close is Close, removing the datapath's pins with unpin (which detaches it).
func (d *Daemon) close(unpin bool) error {
	// After Run they are closed already, and closing again only says so.
	if d.httpLn != nil {
		d.httpLn.Close()
		d.pfcpConn.Close()
	}
	if d.gtpu != nil {
		d.gtpu.Close()
	}
	d.stopClock()
	d.stopMTU()
	var errs []error
	if d.dp != nil {
		errs = append(errs, d.dp.Close(unpin))
	}
	if unpin {
		made, err := madeReturnDevice(d.cfg)
		if made != "" {
			err = errors.Join(err, removeReturnDevice(d.cfg, made))
		}
		errs = append(errs, err)
	}
	if d.store != nil {
		errs = append(errs, d.store.Close())
	}
	return errors.Join(append(errs, d.pinLock.Unlock())...)
}

// The configuration's names of the meters' algorithms and clocks.
var (
	meterAlgos = map[config.QoSAlgorithm]datapath.MeterAlgo{config.AlgoTokenBucket: datapath.TokenBucket,
		config.AlgoSlidingWindow: datapath.SlidingWindow, config.AlgoFixedWindow: datapath.FixedWindow}
	meterClocks = map[config.QoSClock]datapath.Clock{config.ClockKtime: datapath.ClockKtime,
		config.ClockCoarse: datapath.ClockCoarse, config.ClockUser: datapath.ClockUser}
	spreadModes = map[config.SpreadMode]datapath.SpreadMode{config.SpreadOff: datapath.SpreadOff,
		config.SpreadTEID: datapath.SpreadTEID, config.SpreadFlow: datapath.SpreadFlow}
)

// checkForwarding fails when name does not exist or IPv4 forwarding is off on it: bpf_fib_lookup then refuses to
// route for packets arriving there, and nothing would be forwarded.
func checkForwarding(name string) error {
	b, err := os.ReadFile("/proc/sys/net/ipv4/conf/" + name + "/forwarding")
	if errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("interface %q: no such interface (or it has no IPv4); check interfaces[].name "+
			"against `ip link`", name)
	}
	if err != nil {
		return fmt.Errorf("interface %q: read forwarding setting: %w", name, err)
	}
	if len(b) > 0 && b[0] == '0' {
		return fmt.Errorf("interface %q: IPv4 forwarding is off, so the kernel FIB will not route for it; "+
			"enable it with `sysctl -w net.ipv4.conf.all.forwarding=1`", name)
	}
	return nil
}

// acceptLocal lets the kernel forward the packets the datapath has already encapsulated but
// hands over because the next hop's MAC is not resolved yet: downlink packets arriving on N6,
// and uplink packets re-tunnelled to another UPF (N9) arriving on N3. Their source is our
// GTP-U address, which the kernel otherwise rejects as a martian.
func acceptLocal(name string) error {
	if err := os.WriteFile("/proc/sys/net/ipv4/conf/"+name+"/accept_local", []byte("1"), 0o644); err != nil {
		return fmt.Errorf("interface %q: set accept_local: %w", name, err)
	}
	return nil
}
