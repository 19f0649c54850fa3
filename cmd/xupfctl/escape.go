package main

import (
	"bytes"
	"fmt"
	"io"
	"strconv"
	"strings"
	"unicode/utf8"

	"gopkg.in/yaml.v3"
)

// What xupfctl prints comes from the daemon, and much of it from further away: an SMF's Node
// ID, its flow descriptions, network instances. A peer that puts a newline, a tab or a
// terminal escape sequence (ESC [ ...) in them must not be able to forge table rows, recolour
// or clear the operator's terminal, or hide text (bidirectional overrides). Every such value
// is therefore printed escaped.

// cell returns s as a table shows it: as is when every character is printable, else quoted
// with Go's escapes ("smf\n\x1b[2J"), so that the value stays on one line, in one column, and
// visibly odd. A value that starts with a quote is quoted too, so that no raw value can pass
// for an escaped one.
func cell(s string) string {
	if strings.HasPrefix(s, `"`) || strings.IndexFunc(s, notPrintable) >= 0 || !utf8.ValidString(s) {
		return strconv.Quote(s)
	}
	return s
}

// notPrintable is true for what strconv.Quote escapes: control characters (C0, DEL, C1),
// format characters such as the bidirectional overrides, and every other non-graphic rune
// but the space.
func notPrintable(r rune) bool { return !strconv.IsPrint(r) }

// tprintf is fmt.Fprintf for tables and one-line reports: every string (and Stringer)
// argument goes through cell first.
func tprintf(w io.Writer, format string, args ...any) (int, error) {
	for i, a := range args {
		switch v := a.(type) {
		case string:
			args[i] = cell(v)
		case fmt.Stringer:
			args[i] = cell(v.String())
		}
	}
	return fmt.Fprintf(w, format, args...)
}

// message escapes the non-printable characters of a free-form message, such as an error
// from the daemon, one by one, keeping its line breaks and tabs.
func message(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		r, size := utf8.DecodeRuneInString(s)
		switch {
		case r == utf8.RuneError && size == 1:
			fmt.Fprintf(&b, `\x%02x`, s[0])
		case r == '\n' || r == '\t' || !notPrintable(r):
			b.WriteRune(r)
		default:
			q := strconv.QuoteRune(r)
			b.WriteString(q[1 : len(q)-1])
		}
		s = s[size:]
	}
	return b.String()
}

// quoteUnprintable makes every scalar under n that holds a non-printable rune double-quoted,
// the one YAML style with escapes: yaml.v3 then escapes the controls itself, and
// escapeYAML can escape the rest.
func quoteUnprintable(n *yaml.Node) {
	if n.Kind == yaml.ScalarNode && strings.IndexFunc(n.Value, notPrintable) >= 0 {
		n.Style = yaml.DoubleQuotedStyle
	}
	for _, c := range n.Content {
		quoteUnprintable(c)
	}
}

// escapeYAML escapes, as \uXXXX, the non-printable runes above ASCII that yaml.v3 writes
// raw, such as the bidirectional overrides (it escapes the controls and every rune beyond
// the BMP itself). After quoteUnprintable they can only be inside double-quoted scalars,
// where the escape means the same rune.
func escapeYAML(data []byte) []byte {
	return escapeRunes(data, func(b *bytes.Buffer, r rune) { fmt.Fprintf(b, `\u%04x`, r) })
}

// escapeRunes returns data with every non-printable rune from DEL up written by esc; data
// itself when there is none.
func escapeRunes(data []byte, esc func(*bytes.Buffer, rune)) []byte {
	unprintable := func(r rune) bool { return r >= 0x7f && notPrintable(r) }
	if bytes.IndexFunc(data, unprintable) < 0 {
		return data
	}
	var b bytes.Buffer
	for _, r := range string(data) {
		if unprintable(r) {
			esc(&b, r)
		} else {
			b.WriteRune(r)
		}
	}
	return b.Bytes()
}

// escapeJSON escapes, as \uXXXX, the runes encoding/json leaves raw although a terminal may
// act on them: DEL, the C1 controls and the other non-printable runes above ASCII (it
// escapes those below 0x20 itself). Outside strings JSON is printable ASCII, so every such
// rune is inside a string, where the escape means the same rune.
func escapeJSON(data []byte) []byte {
	return escapeRunes(data, func(b *bytes.Buffer, r rune) {
		if r > 0xffff { // a surrogate pair, as JSON spells runes beyond the BMP
			r -= 0x10000
			fmt.Fprintf(b, `\u%04x\u%04x`, 0xd800+(r>>10), 0xdc00+(r&0x3ff))
			return
		}
		fmt.Fprintf(b, `\u%04x`, r)
	})
}
