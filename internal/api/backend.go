package api

import "errors"

// ErrNotFound is returned by a Backend when the requested object does not exist.
var ErrNotFound = errors.New("not found")

// Backend is what the HTTP API serves; the daemon implements it.
type Backend interface {
	Status() Status
	Sessions() ([]SessionInfo, error)
	// Session returns ErrNotFound (possibly wrapped) for an unknown id.
	Session(id uint64) (SessionInfo, error)
	Stats() (Stats, error)
}
