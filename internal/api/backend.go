package api

import (
	"errors"

	"github.com/xupf/xupf/internal/classifier"
	"github.com/xupf/xupf/internal/pfcp"
)

// The errors a Backend returns, possibly wrapped, for the server to answer with the matching
// status code. The client's *ResponseError satisfies errors.Is for them too.
var (
	// ErrNotFound: the requested object does not exist (404).
	ErrNotFound = errors.New("not found")
	// ErrConflict: the object to create already exists (409).
	ErrConflict = errors.New("conflict")
	// ErrInvalid: the object sent is not valid; the error's text says which field and why,
	// and is sent to the client as is (400).
	ErrInvalid = errors.New("invalid")
)

// WithKind returns an error whose text is err's own and which also satisfies errors.Is(_, kind),
// kind being one of ErrNotFound, ErrConflict or ErrInvalid. It is how a Backend marks an error
// without prefixing the message the server will show.
func WithKind(kind, err error) error {
	return &kindError{kind: kind, err: err}
}

type kindError struct{ kind, err error }

func (e *kindError) Error() string   { return e.err.Error() }
func (e *kindError) Unwrap() []error { return []error{e.kind, e.err} }

// Backend is what the HTTP API serves; the daemon implements it.
type Backend interface {
	// Status is the daemon's state; its Sessions counts the static and the PFCP sessions.
	Status() Status
	// Sessions returns the static sessions, in any order.
	Sessions() ([]SessionInfo, error)
	// Session returns ErrNotFound (possibly wrapped) for an unknown id.
	Session(id uint64) (SessionInfo, error)
	// PFCPSessions returns the sessions SMFs established over PFCP, in any order.
	PFCPSessions() ([]PFCPSessionInfo, error)
	// PFCPSession returns one PFCP session by this UPF's SEID; ErrNotFound (possibly
	// wrapped) for an unknown one.
	PFCPSession(seid uint64) (PFCPSessionInfo, error)
	Stats() (Stats, error)

	// Classes returns every traffic class with its counters, in any order.
	Classes() ([]ClassInfo, error)
	// Class returns one class; ErrNotFound (possibly wrapped) for an unknown id.
	Class(id uint32) (ClassInfo, error)
	// AddClass validates c, installs it and returns it with its (zero) counters. It returns
	// ErrConflict when c.ID is taken and ErrInvalid, with a message naming the field, when
	// c is not valid; any other error is the daemon's own failure.
	AddClass(c classifier.Class) (ClassInfo, error)
	// DeleteClass removes a class; ErrNotFound for an unknown id.
	DeleteClass(id uint32) error

	// Contracts returns every policer contract with its counters, in any order.
	Contracts() ([]ContractInfo, error)
	// Contract returns the contract of a class (0: the default contract); ErrNotFound
	// (possibly wrapped) when it has none.
	Contract(class uint32) (ContractInfo, error)
	// SetContract creates or replaces the contract of a class and returns it with its
	// counters (zero for a new contract; a replaced one's carry on). It returns ErrInvalid,
	// with the message of c.Check, when c is not valid; any other error is the daemon's own
	// failure.
	SetContract(class uint32, c Contract) (ContractInfo, error)
	// DeleteContract removes the contract of a class, and its counters; ErrNotFound when it
	// has none.
	DeleteContract(class uint32) error

	// Routes returns the datapath's routes (private, or as mirrored), in any order.
	Routes() ([]Route, error)
	// AddRoute adds a private route or replaces the one to its prefix, and returns it as
	// stored. ErrInvalid (the text naming the field) for an invalid route; ErrConflict when
	// the router mirrors the kernel.
	AddRoute(r Route) (Route, error)
	// DeleteRoute deletes the private route to prefix: ErrNotFound, ErrInvalid, ErrConflict
	// as for AddRoute.
	DeleteRoute(prefix string) error
	// Neighbours returns the neighbour entries next hops are resolved with, in any order.
	Neighbours() ([]Neighbour, error)
	// AddNeighbour adds a static neighbour or replaces the one of its address and interface;
	// errors as for AddRoute.
	AddNeighbour(n Neighbour) (Neighbour, error)
	// DeleteNeighbour deletes a static neighbour; errors as for DeleteRoute.
	DeleteNeighbour(iface, address string) error

	// Flows returns the flow cache's entries, in any order; ErrConflict when the cache is
	// off.
	Flows() ([]CachedFlow, error)
	// FlushFlows removes the flow cache's entries match selects and returns how many;
	// ErrConflict when the cache is off.
	FlushFlows(match func(CachedFlow) bool) (int, error)

	// Associations returns the established PFCP associations, in any order.
	Associations() []pfcp.Association

	// RunningConfig is the configuration the daemon runs with, as a YAML file xupfd
	// accepts: the file's settings with their defaults, and the traffic classes and policer
	// contracts as they are now. It holds no secret (the API token file is named, never
	// read).
	RunningConfig() ([]byte, error)
}
