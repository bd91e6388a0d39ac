package process

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"unsafe"

	"google.golang.org/grpc/encoding"

	"github.com/minfer/minfer/sdk"
)

// CodecName is the gRPC content subtype of minfer's messages ("application/grpc+minfer1").
// The messages are not protobuf: each is a fixed little-endian layout (below), which keeps
// -Inf and NaN logits intact and needs no code generator. go-plugin's own services keep
// using protobuf on the same connection.
const CodecName = "minfer1"

func init() { encoding.RegisterCodec(codec{}) }

// message is implemented by every request and response of the protocol.
type message interface {
	appendTo(b []byte) []byte
	decode(d *decoder)
}

// codec implements encoding.Codec for message values.
type codec struct{}

func (codec) Name() string { return CodecName }

func (codec) Marshal(v any) ([]byte, error) {
	m, ok := v.(message)
	if !ok {
		return nil, fmt.Errorf("process: codec %s: cannot marshal %T", CodecName, v)
	}
	return m.appendTo(nil), nil
}

func (codec) Unmarshal(data []byte, v any) error {
	m, ok := v.(message)
	if !ok {
		return fmt.Errorf("process: codec %s: cannot unmarshal into %T", CodecName, v)
	}
	d := decoder{b: data}
	m.decode(&d)
	if d.err == nil && len(d.b) != 0 {
		d.err = fmt.Errorf("%d trailing bytes", len(d.b))
	}
	if d.err != nil {
		return fmt.Errorf("process: malformed %T: %w", v, d.err)
	}
	return nil
}

// Layout primitives: u32/u64/i64/f32 little-endian; a string or byte slice is a u32 length
// and the bytes; a []int32 or []float32 is a u32 count and the elements.

func putU32(b []byte, v uint32) []byte  { return binary.LittleEndian.AppendUint32(b, v) }
func putU64(b []byte, v uint64) []byte  { return binary.LittleEndian.AppendUint64(b, v) }
func putI64(b []byte, v int64) []byte   { return putU64(b, uint64(v)) }
func putF32(b []byte, v float32) []byte { return putU32(b, math.Float32bits(v)) }
func putBytes(b []byte, s []byte) []byte {
	return append(putU32(b, uint32(len(s))), s...)
}

// word is a 4-byte value carried as its little-endian bits.
type word interface{ int32 | float32 }

func putWords[T word](b []byte, s []T) []byte {
	b = putU32(b, uint32(len(s)))
	for i := range s {
		b = putU32(b, *(*uint32)(unsafe.Pointer(&s[i])))
	}
	return b
}

var errShort = errors.New("message too short")

// decoder reads the layout; the first error sticks and later reads return zero values.
// Counts are checked against the bytes left before anything is allocated.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if n < 0 || n > len(d.b) {
		d.err = errShort
		return nil
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p
}

func (d *decoder) u32() uint32 {
	if p := d.take(4); p != nil {
		return binary.LittleEndian.Uint32(p)
	}
	return 0
}

func (d *decoder) u64() uint64 {
	if p := d.take(8); p != nil {
		return binary.LittleEndian.Uint64(p)
	}
	return 0
}

func (d *decoder) i64() int64   { return int64(d.u64()) }
func (d *decoder) f32() float32 { return math.Float32frombits(d.u32()) }

// count reads a u32 count of elements of size bytes each, checked against what is left.
func (d *decoder) count(size int) int {
	n := int(d.u32())
	if d.err == nil && n > len(d.b)/size {
		d.err = fmt.Errorf("count %d exceeds the %d bytes left", n, len(d.b))
		return 0
	}
	return n
}

func (d *decoder) bytes() []byte {
	n := d.count(1)
	return append([]byte(nil), d.take(n)...)
}

func (d *decoder) str() string { return string(d.take(d.count(1))) }

// words reads a u32 count and that many little-endian 4-byte words.
func words[T word](d *decoder) []T {
	n := d.count(4)
	p := d.take(4 * n)
	if p == nil {
		return nil
	}
	s := make([]T, n)
	for i := range s {
		*(*uint32)(unsafe.Pointer(&s[i])) = binary.LittleEndian.Uint32(p[4*i:])
	}
	return s
}

// empty is a message without fields.
type empty struct{}

func (*empty) appendTo(b []byte) []byte { return b }
func (*empty) decode(*decoder)          {}

// infoResponse describes the plugin binary: what it calls itself and which roles it
// serves (sdk role names).
type infoResponse struct {
	Protocol uint32
	Name     string
	Version  string
	Roles    []string
}

func (m *infoResponse) appendTo(b []byte) []byte {
	b = putU32(b, m.Protocol)
	b = putBytes(b, []byte(m.Name))
	b = putBytes(b, []byte(m.Version))
	b = putU32(b, uint32(len(m.Roles)))
	for _, r := range m.Roles {
		b = putBytes(b, []byte(r))
	}
	return b
}

func (m *infoResponse) decode(d *decoder) {
	m.Protocol = d.u32()
	m.Name = d.str()
	m.Version = d.str()
	n := d.count(4)
	m.Roles = make([]string, 0, n)
	for range n {
		m.Roles = append(m.Roles, d.str())
	}
}

// newRequest creates an instance of a role with its params (a JSON object).
type newRequest struct{ Params []byte }

func (m *newRequest) appendTo(b []byte) []byte { return putBytes(b, m.Params) }
func (m *newRequest) decode(d *decoder)        { m.Params = d.bytes() }

// newResponse names the new instance; Window (penalty) and TopK (sampler) are the
// instance's answers to sdk.Penalty.Window and sdk.Sampler.Needs.
type newResponse struct {
	ID     uint64
	Window int64
	TopK   int64
}

func (m *newResponse) appendTo(b []byte) []byte {
	return putI64(putI64(putU64(b, m.ID), m.Window), m.TopK)
}

func (m *newResponse) decode(d *decoder) {
	m.ID = d.u64()
	m.Window = d.i64()
	m.TopK = d.i64()
}

// idRequest addresses an instance (Free).
type idRequest struct{ ID uint64 }

func (m *idRequest) appendTo(b []byte) []byte { return putU64(b, m.ID) }
func (m *idRequest) decode(d *decoder)        { m.ID = d.u64() }

// capsResponse is the Meta/Caps answer (protocol minor 1; a plugin before it does not
// serve Caps): the protocol minor the plugin reads, and the params it declares.
type capsResponse struct {
	Minor    uint32
	Declared bool
	Params   []string
}

func (m *capsResponse) appendTo(b []byte) []byte {
	var flags uint32
	if m.Declared {
		flags = 1
	}
	b = putU32(putU32(b, m.Minor), flags)
	b = putU32(b, uint32(len(m.Params)))
	for _, k := range m.Params {
		b = putBytes(b, []byte(k))
	}
	return b
}

func (m *capsResponse) decode(d *decoder) {
	m.Minor = d.u32()
	flags := d.u32()
	if flags&^1 != 0 && d.err == nil {
		d.err = fmt.Errorf("caps: unknown flags %#x", flags&^1)
	}
	m.Declared = flags&1 != 0
	n := d.count(4)
	m.Params = make([]string, 0, n)
	for range n {
		m.Params = append(m.Params, d.str())
	}
	if d.err == nil && (!m.Declared && n > 0) {
		d.err = fmt.Errorf("caps: %d params with no declaration flag", n)
	}
	if d.err == nil {
		if err := sdk.CheckParamNames(m.Params); err != nil {
			d.err = fmt.Errorf("caps: %v", err)
		}
	}
}

// policyRequest is one sdk.DepthPolicy.NextDepth call. Minor is the protocol minor of
// the plugin it goes to (not sent): from 1 the request always carries the drafter and
// batch trailer.
type policyRequest struct {
	ID    uint64
	Last  sdk.RoundOutcome
	Minor uint32
}

func (m *policyRequest) appendTo(b []byte) []byte {
	o := &m.Last
	b = putU64(b, m.ID)
	for _, v := range []int64{int64(o.Round), int64(o.Depth), int64(o.Drafted), int64(o.Accepted), o.DraftNs, o.VerifyNs, int64(o.MaxDepth)} {
		b = putI64(b, v)
	}
	b = putWords(b, o.DraftConf)
	// A plugin before minor 1 reads the drafter trailer only, and only when the
	// sequence offers several drafters (a plugin built before drafters reads none).
	if m.Minor >= 1 || o.Drafters > 1 {
		b = putI64(putI64(b, int64(o.Drafter)), int64(o.Drafters))
	}
	if m.Minor >= 1 {
		b = putI64(putI64(b, int64(o.BatchSeqs)), int64(o.BatchRows))
	}
	if m.Minor >= 2 {
		b = putU32(b, uint32(len(o.Offered)))
		for _, v := range o.Offered {
			b = putI64(b, int64(v))
		}
	}
	return b
}

func (m *policyRequest) decode(d *decoder) {
	o := &m.Last
	m.ID = d.u64()
	o.Round, o.Depth, o.Drafted, o.Accepted = int(d.i64()), int(d.i64()), int(d.i64()), int(d.i64())
	o.DraftNs, o.VerifyNs, o.MaxDepth = d.i64(), d.i64(), int(d.i64())
	o.DraftConf = words[float32](d)
	o.Drafter, o.Drafters, o.BatchSeqs, o.BatchRows = 0, 0, 0, 0
	if d.err == nil && len(d.b) > 0 {
		o.Drafter, o.Drafters = int(d.i64()), int(d.i64())
	}
	if d.err == nil && len(d.b) > 0 {
		o.BatchSeqs, o.BatchRows = int(d.i64()), int(d.i64())
		m.Minor = 1 // written for a plugin of minor 1: so it encodes back
	}
	o.Offered = nil
	if d.err == nil && len(d.b) > 0 {
		n := d.count(8)
		if n > sdk.MaxDrafters {
			d.err = fmt.Errorf("%d offers, at most %d drafters", n, sdk.MaxDrafters)
			return
		}
		for range n {
			o.Offered = append(o.Offered, int(d.i64()))
		}
		m.Minor = 2
	}
}

// policyResponse is sdk.DepthDecision.
type policyResponse struct{ sdk.DepthDecision }

func (m *policyResponse) appendTo(b []byte) []byte {
	var flags uint32
	if m.KeepCut {
		flags = 1
	}
	b = putU32(putF32(putI64(b, int64(m.Depth)), m.MinConf), flags)
	if m.Drafter != 0 {
		b = putI64(b, int64(m.Drafter))
	}
	return b
}

// decode reads a response; one from a plugin built before keep_cut ends after
// min_conf and reads as keep_cut false, one without a drafter reads as drafter 0.
func (m *policyResponse) decode(d *decoder) {
	m.Depth = int(d.i64())
	m.MinConf = d.f32()
	if d.err == nil && len(d.b) > 0 {
		flags := d.u32()
		if flags&^1 != 0 && d.err == nil {
			d.err = fmt.Errorf("policy response: unknown flags %#x", flags&^1)
		}
		m.KeepCut = flags&1 != 0
	}
	if d.err == nil && len(d.b) > 0 {
		m.Drafter = int(d.i64())
		if d.err == nil && (m.Drafter < 0 || m.Drafter >= sdk.MaxDrafters) {
			d.err = fmt.Errorf("policy response: drafter %d outside [0, %d)", m.Drafter, sdk.MaxDrafters)
		}
	}
}

// penaltyRequest is one sdk.Penalty.Apply call.
type penaltyRequest struct {
	ID   uint64
	Rows []sdk.PenaltyRow
}

func (m *penaltyRequest) appendTo(b []byte) []byte {
	b = putU32(putU64(b, m.ID), uint32(len(m.Rows)))
	for i := range m.Rows {
		r := &m.Rows[i]
		b = putWords(putWords(putWords(b, r.History), r.IDs), r.Logits)
	}
	return b
}

func (m *penaltyRequest) decode(d *decoder) {
	m.ID = d.u64()
	n := d.count(12) // a row is at least three counts
	m.Rows = make([]sdk.PenaltyRow, n)
	for i := range m.Rows {
		r := &m.Rows[i]
		r.History, r.IDs, r.Logits = words[int32](d), words[int32](d), words[float32](d)
	}
}

// penaltyResponse carries each row's rewritten logits.
type penaltyResponse struct{ Logits [][]float32 }

func (m *penaltyResponse) appendTo(b []byte) []byte {
	b = putU32(b, uint32(len(m.Logits)))
	for _, l := range m.Logits {
		b = putWords(b, l)
	}
	return b
}

func (m *penaltyResponse) decode(d *decoder) {
	n := d.count(4)
	m.Logits = make([][]float32, n)
	for i := range m.Logits {
		m.Logits[i] = words[float32](d)
	}
}

// sampleRequest is one sdk.Sampler.Sample call.
type sampleRequest struct {
	ID    uint64
	Round sdk.SampleRound
}

func (m *sampleRequest) appendTo(b []byte) []byte {
	r := &m.Round
	b = putU64(putU64(putU64(b, m.ID), r.Seed), r.Step)
	b = putWords(b, r.Draft)
	b = putU32(b, uint32(len(r.Rows)))
	for i := range r.Rows {
		row := &r.Rows[i]
		b = putWords(putWords(b, row.IDs), row.Logits)
		b = putF32(putF32(putF32(b, row.DraftLogit), row.MaxLogit), row.LogSumExp)
	}
	return b
}

func (m *sampleRequest) decode(d *decoder) {
	r := &m.Round
	m.ID, r.Seed, r.Step = d.u64(), d.u64(), d.u64()
	r.Draft = words[int32](d)
	n := d.count(20) // two counts and three floats
	r.Rows = make([]sdk.SampleRow, n)
	for i := range r.Rows {
		row := &r.Rows[i]
		row.IDs, row.Logits = words[int32](d), words[float32](d)
		row.DraftLogit, row.MaxLogit, row.LogSumExp = d.f32(), d.f32(), d.f32()
	}
}

// sampleResponse is sdk.SampleResult.
type sampleResponse struct{ sdk.SampleResult }

func (m *sampleResponse) appendTo(b []byte) []byte {
	return putU32(putI64(b, int64(m.Accepted)), uint32(m.Next))
}

func (m *sampleResponse) decode(d *decoder) {
	m.Accepted = int(d.i64())
	m.Next = int32(d.u32())
}

// draftRequest is one sdk.Drafter.Draft call.
type draftRequest struct {
	ID uint64
	Q  sdk.DraftRequest
}

func (m *draftRequest) appendTo(b []byte) []byte {
	b = putI64(putI64(putU64(b, m.ID), int64(m.Q.MaxDepth)), int64(m.Q.Vocab))
	return putWords(b, m.Q.Appended)
}

func (m *draftRequest) decode(d *decoder) {
	m.ID = d.u64()
	m.Q.MaxDepth, m.Q.Vocab = int(d.i64()), int(d.i64())
	m.Q.Appended = words[int32](d)
}

// draftResponse is sdk.DraftResult.
type draftResponse struct{ sdk.DraftResult }

func (m *draftResponse) appendTo(b []byte) []byte {
	return putWords(putWords(b, m.Tokens), m.Conf)
}

func (m *draftResponse) decode(d *decoder) {
	m.Tokens, m.Conf = words[int32](d), words[float32](d)
}
