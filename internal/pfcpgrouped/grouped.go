// Package pfcpgrouped makes go-pfcp's test of whether an IE type is grouped a table lookup.
// go-pfcp asks it of every IE it parses, sizes or marshals, and answers from a map under a
// read lock: 8 % of xupfd's CPU while SMFs establish sessions, and as much of the SMF
// client's. Imported for its effect, this package replaces that answer with a bit table
// built at start from go-pfcp's own answers, so every type is answered as before.
package pfcpgrouped

import "github.com/wmnsk/go-pfcp/ie"

// grouped has bit t set when IE type t is grouped.
var grouped [1 << 16 / 64]uint64

func init() {
	for t := range 1 << 16 {
		if (&ie.IE{Type: uint16(t)}).IsGrouped() {
			grouped[t/64] |= 1 << (t % 64)
		}
	}
	ie.SetIsGroupedFun(isGrouped)
}

func isGrouped(t uint16) bool { return grouped[t/64]&(1<<(t%64)) != 0 }
