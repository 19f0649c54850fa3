// Package gtpu is the GTP-U signalling xupfd sends and receives itself (TS 29.281): Error
// Indication and End Marker. The datapath answers Echo Requests and carries G-PDUs; what it
// hands over comes here through the endpoint's UDP sockets on the GTP-U addresses.
package gtpu

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net/netip"
)

// Port is the GTP-U UDP port (TS 29.281 4.4.2).
const Port = 2152

// Message types (TS 29.281 6.1).
const (
	TypeErrorIndication = 26
	TypeEndMarker       = 254
)

// Header flags: version 1, protocol type GTP, and the S flag.
const (
	flagsV1PT = 0x30
	flagS     = 0x02
	flagE     = 0x04
	flagsOpt  = 0x07 // E, S, PN: any of them adds the 4 optional octets
)

// Information elements (TS 29.281 8).
const (
	ieRecovery    = 14  // TV, 1 octet
	ieTEIDDataI   = 16  // TV, 4 octets
	iePeerAddress = 133 // TLV: an IPv4 or IPv6 address
)

const headerLen = 8

// ErrorIndication is an Error Indication's content: the TEID of the G-PDU that could not be
// delivered (TEID Data I) and the address it was sent to (GTP-U Peer Address), the receiver's
// own.
type ErrorIndication struct {
	TEID uint32
	Peer netip.Addr
}

// Marshal encodes an Error Indication (TS 29.281 7.3.1): TEID 0, the S flag set as 5.1 asks of
// signalling messages, sequence number 0, then TEID Data I and GTP-U Peer Address.
func (e ErrorIndication) Marshal() []byte {
	addr := e.Peer.AsSlice()
	b := make([]byte, 0, headerLen+4+5+3+len(addr))
	b = append(b, flagsV1PT|flagS, TypeErrorIndication, 0, 0, 0, 0, 0, 0, // length set below, TEID 0
		0, 0, 0, 0) // sequence number, N-PDU number, next extension header
	b = append(b, ieTEIDDataI)
	b = binary.BigEndian.AppendUint32(b, e.TEID)
	b = append(b, iePeerAddress)
	b = binary.BigEndian.AppendUint16(b, uint16(len(addr)))
	b = append(b, addr...)
	binary.BigEndian.PutUint16(b[2:], uint16(len(b)-headerLen))
	return b
}

// EndMarker encodes an End Marker for the tunnel teid (TS 29.281 7.3.2): the header alone.
func EndMarker(teid uint32) []byte {
	b := []byte{flagsV1PT, TypeEndMarker, 0, 0, 0, 0, 0, 0}
	binary.BigEndian.PutUint32(b[4:], teid)
	return b
}

// maxExtensions bounds the extension headers walked, as the datapath does.
const maxExtensions = 4

var errShort = errors.New("gtpu: message shorter than its fields")

// ParseErrorIndication decodes an Error Indication. Every length is checked against b: any
// bytes give a result or an error.
func ParseErrorIndication(b []byte) (ErrorIndication, error) {
	var e ErrorIndication
	if len(b) < headerLen {
		return e, errShort
	}
	if b[0]&0xf0 != flagsV1PT {
		return e, fmt.Errorf("gtpu: not GTP-U version 1 (flags 0x%02x)", b[0])
	}
	if b[1] != TypeErrorIndication {
		return e, fmt.Errorf("gtpu: message type %d is not an Error Indication", b[1])
	}
	length := int(binary.BigEndian.Uint16(b[2:]))
	if headerLen+length > len(b) {
		return e, errShort
	}
	body := b[headerLen : headerLen+length]
	if b[0]&flagsOpt != 0 {
		if len(body) < 4 {
			return e, errShort
		}
		next := body[3]
		body = body[4:]
		if b[0]&flagE == 0 {
			next = 0
		}
		for i := 0; next != 0; i++ {
			if i == maxExtensions {
				return e, errors.New("gtpu: extension header chain too long")
			}
			if len(body) < 1 || body[0] == 0 || len(body) < 4*int(body[0]) {
				return e, errors.New("gtpu: malformed extension header")
			}
			size := 4 * int(body[0])
			next, body = body[size-1], body[size:]
		}
	}
	var haveTEID, havePeer bool
	for len(body) > 0 {
		t := body[0]
		switch {
		case t == ieRecovery:
			if len(body) < 2 {
				return e, errShort
			}
			body = body[2:]
		case t == ieTEIDDataI:
			if len(body) < 5 {
				return e, errShort
			}
			e.TEID, haveTEID = binary.BigEndian.Uint32(body[1:]), true
			body = body[5:]
		case t < 128:
			// A TV IE of unknown length: nothing after it can be read.
			return e, fmt.Errorf("gtpu: unknown TV information element %d", t)
		default:
			if len(body) < 3 {
				return e, errShort
			}
			n := int(binary.BigEndian.Uint16(body[1:]))
			if len(body) < 3+n {
				return e, errShort
			}
			if t == iePeerAddress {
				a, ok := netip.AddrFromSlice(body[3 : 3+n])
				if !ok {
					return e, fmt.Errorf("gtpu: GTP-U Peer Address of %d octets", n)
				}
				e.Peer, havePeer = a.Unmap(), true
			}
			body = body[3+n:]
		}
	}
	if !haveTEID || !havePeer {
		return e, errors.New("gtpu: Error Indication without TEID Data I or GTP-U Peer Address")
	}
	return e, nil
}
