package frames

import "testing"

func benchTransfer() *Transfer {
	return &Transfer{Handle: 1, DeliveryID: u32(123456), DeliveryTag: []byte("0123456789abcdef"),
		MessageFormat: u32(0), Payload: make([]byte, 1024)}
}

func BenchmarkAppendTransfer1KiB(b *testing.B) {
	tr := benchTransfer()
	buf := make([]byte, 0, 2048)
	b.ReportAllocs()
	b.SetBytes(int64(len(tr.Payload)))
	for b.Loop() {
		buf, _ = Append(buf[:0], TypeAMQP, 1, tr)
	}
}

func BenchmarkDecodeTransfer1KiB(b *testing.B) {
	frame, _ := Append(nil, TypeAMQP, 1, benchTransfer())
	var d Decoder
	b.ReportAllocs()
	b.SetBytes(1024)
	for b.Loop() {
		h, _ := ParseHeader(frame)
		if _, err := d.Decode(h, frame); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeFlow(b *testing.B) {
	frame, _ := Append(nil, TypeAMQP, 1, &Flow{NextIncomingID: u32(1), IncomingWindow: 5000, NextOutgoingID: 1,
		OutgoingWindow: 5000, Handle: u32(0), DeliveryCount: u32(10), LinkCredit: u32(100)})
	var d Decoder
	b.ReportAllocs()
	for b.Loop() {
		h, _ := ParseHeader(frame)
		if _, err := d.Decode(h, frame); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeDisposition(b *testing.B) {
	frame, _ := Append(nil, TypeAMQP, 1, &Disposition{Role: RoleReceiver, First: 1000, Last: u32(1010),
		Settled: true, State: &Accepted{}})
	var d Decoder
	b.ReportAllocs()
	for b.Loop() {
		h, _ := ParseHeader(frame)
		if _, err := d.Decode(h, frame); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendDisposition(b *testing.B) {
	disp := &Disposition{Role: RoleSender, First: 1000, Settled: true, State: &Accepted{}}
	buf := make([]byte, 0, 64)
	b.ReportAllocs()
	for b.Loop() {
		buf, _ = Append(buf[:0], TypeAMQP, 1, disp)
	}
}

func BenchmarkDecodeAttach(b *testing.B) {
	frame, _ := Append(nil, TypeAMQP, 1, sampleBodies()[4])
	b.ReportAllocs()
	for b.Loop() {
		h, _ := ParseHeader(frame)
		if _, err := Decode(h, frame); err != nil {
			b.Fatal(err)
		}
	}
}
