package api

import (
	"cmp"
	"errors"
	"fmt"
	"net/http"
	"reflect"
	"slices"
	"strconv"

	"github.com/xupf/xupf/internal/policer"
)

// The policer's contract actions: internal/policer's names (policer.Action.String).
const (
	ActionPass  = "pass"
	ActionDrop  = "drop"
	ActionLimit = "limit"
)

// Bounds of a limit: internal/policer's. The rate is metered in bytes per second, hence its
// multiple of 8.
const (
	MinContractRateBPS = policer.MinRateBPS
	MaxContractRateBPS = policer.MaxRateBPS // 1 Tbit/s
	MaxContractBurst   = policer.MaxBurst
)

// DefaultContractClass is the class id of the default contract.
const DefaultContractClass = policer.DefaultClass

// ContractName names the contract of class in messages: "contract for class 3", or "default
// contract".
func ContractName(class uint32) string {
	if class == DefaultContractClass {
		return "default contract"
	}
	return fmt.Sprintf("contract for class %d", class)
}

// Check says what is wrong with c as the contract of class, one line per field, each naming
// it, after a first line naming the contract; nil when c is valid. A Backend's SetContract
// checks with it.
func (c Contract) Check(class uint32) error {
	var errs []error
	switch c.Action {
	case ActionLimit:
		switch r := c.RateBPS; {
		case r == 0:
			errs = append(errs, errors.New("rate_bps: a limit needs a rate in bits per second, e.g. 10000000 for 10 Mbit/s"))
		case r < MinContractRateBPS || r > MaxContractRateBPS:
			errs = append(errs, fmt.Errorf("rate_bps: %d is out of range; use %d (1 byte/s) to %d (1 Tbit/s)",
				r, MinContractRateBPS, MaxContractRateBPS))
		case r%8 != 0:
			errs = append(errs, fmt.Errorf("rate_bps: %d is not a multiple of 8 (the policer meters whole bytes per second); use %d or %d",
				r, r/8*8, r/8*8+8))
		}
		switch b := c.BurstBytes; {
		case b == 0:
			errs = append(errs, errors.New("burst_bytes: a limit needs a burst in bytes, at least the largest packet, e.g. 65536"))
		case b > MaxContractBurst:
			errs = append(errs, fmt.Errorf("burst_bytes: %d is out of range; use 1 to %d", b, uint64(MaxContractBurst)))
		}
	case ActionPass, ActionDrop:
		if c.RateBPS != 0 {
			errs = append(errs, fmt.Errorf("rate_bps: %s takes no rate; leave rate_bps out, or use action limit", c.Action))
		}
		if c.BurstBytes != 0 {
			errs = append(errs, fmt.Errorf("burst_bytes: %s takes no burst; leave burst_bytes out, or use action limit", c.Action))
		}
	case "":
		errs = append(errs, errors.New("action: missing; use pass, drop or limit"))
	default:
		errs = append(errs, fmt.Errorf("action: %q is not an action; use pass, drop or limit", c.Action))
	}
	if len(errs) == 0 {
		return nil
	}
	return fmt.Errorf("%s: %w", ContractName(class), errors.Join(errs...))
}

// ParseContractClass parses the class id of a contract as the API and xupfctl take it:
// decimal, 0 (the default contract) to 4294967295. The error is the message the server
// answers with.
func ParseContractClass(raw string) (uint32, error) {
	id, err := strconv.ParseUint(raw, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("class id %q is not a number from 0 to 4294967295; use a class id from `xupfctl classifier list`, or 0 for the default contract", raw)
	}
	return uint32(id), nil
}

// ContractNotFound is the message for a class without a contract.
func ContractNotFound(class uint32) string {
	if class == DefaultContractClass {
		return "there is no default contract (class 0)"
	}
	return fmt.Sprintf("class %d has no contract", class)
}

// maxContractBody bounds a contract request body; a contract is a few dozen bytes.
const maxContractBody = 4 << 10

const contractExample = `e.g. {"action": "limit", "rate_bps": 10000000, "burst_bytes": 65536}`

// contractBody is what a contract request body must be.
var contractBody = bodySpec{
	noun:    "contract",
	example: contractExample,
	limit:   maxContractBody,
	fields:  jsonFieldNames(reflect.TypeFor[Contract]()),
	want: func(field string, _ reflect.Type) string {
		switch field {
		case "rate_bps":
			return "a whole number of bits per second, e.g. 10000000 for 10 Mbit/s"
		case "burst_bytes":
			return "a whole number of bytes, e.g. 65536"
		}
		return "a string: pass, drop or limit"
	},
	unknown: func(field string) string {
		if field == "class" {
			return "unknown field \"class\" in the contract: the class id is in the path, " +
				"as in PUT /api/v1/policer/contracts/3 (0 for the default contract)"
		}
		return ""
	},
}

func (s *server) contracts(w http.ResponseWriter, r *http.Request) {
	list, err := s.backend.Contracts()
	if err != nil {
		s.internalError(w, r, err)
		return
	}
	list = slices.Clone(list) // sorted here, as sessions are
	slices.SortFunc(list, func(a, b ContractInfo) int { return cmp.Compare(a.Class, b.Class) })
	if list == nil {
		list = []ContractInfo{}
	}
	writeJSON(w, http.StatusOK, list)
}

func (s *server) contract(w http.ResponseWriter, r *http.Request) {
	class, ok := contractClass(w, r)
	if !ok {
		return
	}
	info, err := s.backend.Contract(class)
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, ContractNotFound(class))
	case err != nil:
		s.internalError(w, r, err)
	default:
		writeJSON(w, http.StatusOK, info)
	}
}

func (s *server) setContract(w http.ResponseWriter, r *http.Request) {
	class, ok := contractClass(w, r)
	if !ok {
		return
	}
	var c Contract
	if code, msg := decodeBody(w, r, contractBody, &c); msg != "" {
		writeError(w, code, msg)
		return
	}
	info, err := s.backend.SetContract(class, c)
	switch {
	case errors.Is(err, ErrInvalid):
		writeError(w, http.StatusBadRequest, err.Error())
	case err != nil:
		s.internalError(w, r, err)
	default:
		writeJSON(w, http.StatusOK, info)
	}
}

func (s *server) deleteContract(w http.ResponseWriter, r *http.Request) {
	class, ok := contractClass(w, r)
	if !ok {
		return
	}
	err := s.backend.DeleteContract(class)
	switch {
	case errors.Is(err, ErrNotFound):
		writeError(w, http.StatusNotFound, ContractNotFound(class))
	case err != nil:
		s.internalError(w, r, err)
	default:
		w.WriteHeader(http.StatusNoContent)
	}
}

// contractClass parses the {class} of a contract path, answering 400 itself when it is not a
// class id.
func contractClass(w http.ResponseWriter, r *http.Request) (uint32, bool) {
	class, err := ParseContractClass(r.PathValue("class"))
	if err != nil {
		writeError(w, http.StatusBadRequest, err.Error())
		return 0, false
	}
	return class, true
}
