package frames

import (
	"bytes"
	"testing"
)

// An error is written with all three fields, the null description and info
// included (pyamqp reads them by position).
func TestErrorKeepsNullFields(t *testing.T) {
	got, err := appendError(nil, &Error{Condition: "c"})
	if err != nil {
		t.Fatal(err)
	}
	// described 0x1d, list8 of 6 bytes (the count included) and 3 elements: sym8 "c", null, null.
	want := []byte{0x00, 0x53, 0x1d, 0xc0, 0x06, 0x03, 0xa3, 0x01, 'c', 0x40, 0x40}
	if !bytes.Equal(got, want) {
		t.Fatalf("encoded % x, want % x", got, want)
	}
}
