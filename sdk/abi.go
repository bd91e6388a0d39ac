package sdk

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"strings"
	"unsafe"
)

// ABI v1 of WebAssembly plugins, as constants and as encoders/decoders of its messages.
// ABI.md is the normative description (for authors in any language); the functions
// here implement it for the Go host (plugins/wasm) and Go guests (sdk/guest), and the
// two sides are tested against each other.
//
// Every message starts with a u32 "hdr": the byte size of its fixed header. A newer
// minor version may append fields to a fixed header (never remove or move one); readers
// find what follows the header at offset hdr and ignore fields they do not know. A
// reader fills fields missing from a shorter header with their zero value.

// ABI version implemented by this package. Minor versions only add; a host loads every
// module whose major is ABIMajor and whose minor is ≤ ABIMinor.
const (
	ABIMajor = 1
	ABIMinor = 4 // 1: the policy response's flags (keep_cut); 2: the drafter role, the policy's drafter choice; 3: the verify forward's batch in the policy request, declared params; 4: the drafters' offers in the policy request
)

// Exports of an ABI v1 module. ExportABI is the version marker: a module of another
// major version does not export it (it exports minfer_abi_vN instead).
const (
	ExportABI           = "minfer_abi_v1"         // () -> i32 minor
	ExportInfo          = "minfer_info"           // () -> i64 packed info record
	ExportAlloc         = "minfer_alloc"          // (size i32) -> i32 ptr, 0 = failure
	ExportFree          = "minfer_free"           // (ptr i32, size i32)
	ExportInit          = "minfer_init"           // (ptr i32, len i32) -> i32 status
	ExportLastError     = "minfer_last_error"     // () -> i64 packed UTF-8 message
	ExportPolicyNext    = "minfer_policy_next"    // (ptr i32, len i32) -> i64 packed response
	ExportPenaltyWindow = "minfer_penalty_window" // () -> i32 window, < 0 = error
	ExportPenaltyApply  = "minfer_penalty_apply"  // (ptr i32, len i32) -> i64 packed response
	ExportSamplerNeeds  = "minfer_sampler_needs"  // () -> i32 top-K, < 0 = error
	ExportSample        = "minfer_sample"         // (ptr i32, len i32) -> i64 packed response
	ExportDraft         = "minfer_draft"          // (ptr i32, len i32) -> i64 packed response (v1.2)
)

// Role bits of the info record.
const (
	RoleBitPolicy  = 1
	RoleBitPenalty = 2
	RoleBitSampler = 4
	RoleBitDrafter = 8 // v1.2
	roleBitsKnown  = RoleBitPolicy | RoleBitPenalty | RoleBitSampler | RoleBitDrafter
)

// Limits every host enforces on what a plugin returns.
const (
	MaxDepthLimit = 1024 // a depth above it is a malformed result (below it the engine clamps)
	MaxNameLen    = 64   // plugin name and version strings, bytes
	MaxPlugins    = 256  // plugins per module
	MaxErrorLen   = 4096 // longer error messages are cut
	MaxDrafters   = 256  // drafters a sequence may offer (a policy's drafter index is below it)
	MaxParams     = 256  // params keys a plugin may declare (v1.3), each a name of at most MaxNameLen bytes
)

// Fixed header sizes of ABI v1.4 messages (see ABI.md).
const (
	infoHdr         = 16
	infoEntryHdr    = 24
	infoEntryHdrV2  = 16 // v1.2: no params declaration (the plugin declares none)
	initHdr         = 12
	policyReqHdr    = 64
	policyReqHdrV3  = 60 // v1.3: no offers (read as none)
	policyReqHdrV2  = 52 // v1.2: no batch fields (read as 0)
	policyReqHdrV1  = 44 // v1.1: no drafter fields either (read as 0)
	policyRespHdr   = 20
	policyRespHdrV1 = 16 // v1.1: no drafter (read as drafter 0)
	policyRespHdrV0 = 12 // v1.0: no flags either (read as no flags set)
	penaltyReqHdr   = 12
	penaltyRowHdr   = 8
	penaltyRespHdr  = 12
	penaltyRespRow  = 4
	sampleReqHdr    = 32
	sampleRowHdr    = 16
	sampleRespHdr   = 12
	draftReqHdr     = 16
	draftRespHdr    = 8
)

// ErrMalformed is wrapped by every decoding error.
var ErrMalformed = errors.New("malformed message")

// Pack and Unpack convert between (ptr, len) and the i64 that exports return. A
// negative value is an error status.
func Pack(ptr, n uint32) int64       { return int64(ptr)<<32 | int64(n) }
func Unpack(v int64) (ptr, n uint32) { return uint32(uint64(v) >> 32), uint32(v) }

// RoleBits and RolesOf convert between role lists and the info record's bitmask.
func RoleBits(roles []Role) uint32 {
	var b uint32
	for _, r := range roles {
		switch r {
		case RolePolicy:
			b |= RoleBitPolicy
		case RolePenalty:
			b |= RoleBitPenalty
		case RoleSampler:
			b |= RoleBitSampler
		case RoleDrafter:
			b |= RoleBitDrafter
		}
	}
	return b
}

func RolesOf(bits uint32) []Role {
	var roles []Role
	if bits&RoleBitPolicy != 0 {
		roles = append(roles, RolePolicy)
	}
	if bits&RoleBitPenalty != 0 {
		roles = append(roles, RolePenalty)
	}
	if bits&RoleBitSampler != 0 {
		roles = append(roles, RoleSampler)
	}
	if bits&RoleBitDrafter != 0 {
		roles = append(roles, RoleDrafter)
	}
	return roles
}

// Info describes one plugin: what its module declares, and where the host loaded it from.
type Info struct {
	Name    string
	Version string
	Roles   []Role
	// Needs is the sampler's declared default (the instance reports its actual needs
	// after init, which may depend on params).
	Needs Needs
	// Params are the keys of its params object the plugin reads, the role settings the
	// host merges among them (draft_max, temperature, …), when ParamsDeclared (ABI
	// v1.3, or a process plugin's Declare): the host then merges only those settings
	// and refuses a [plugins.NAME] params key outside them, naming it. A plugin that
	// declares nothing is offered every setting of its roles and every key.
	Params         []string
	ParamsDeclared bool
	// ABIMajor.ABIMinor is the ABI version of the module (0.0 for native plugins).
	ABIMajor, ABIMinor int
	// Source is the config source ("builtin:adaptive", "file:/abs/x.wasm", …) and
	// Checksum the hex SHA-256 of the module bytes; filled by the host.
	Source   string
	Checksum string
}

// Has reports whether the plugin declares role r.
func (i Info) Has(r Role) bool {
	for _, x := range i.Roles {
		if x == r {
			return true
		}
	}
	return false
}

// ModuleInfo is the decoded info record of a module.
type ModuleInfo struct {
	ABIMajor, ABIMinor int
	Plugins            []Info
}

// AppendInfo encodes the info record of a module speaking ABIMajor.ABIMinor.
func AppendInfo(dst []byte, plugins []Info) []byte {
	dst = le32(dst, infoHdr)
	dst = binary.LittleEndian.AppendUint16(dst, ABIMajor)
	dst = binary.LittleEndian.AppendUint16(dst, ABIMinor)
	dst = le32(dst, uint32(len(plugins)))
	dst = le32(dst, infoEntryHdr)
	for _, p := range plugins {
		dst = le32(dst, RoleBits(p.Roles))
		dst = le32(dst, uint32(int32(p.Needs.TopK)))
		dst = le32(dst, uint32(len(p.Name)))
		dst = le32(dst, uint32(len(p.Version)))
		var flags uint32
		if p.ParamsDeclared {
			flags |= infoParamsDeclared
		}
		keys := strings.Join(p.Params, ",")
		dst = le32(dst, flags)
		dst = le32(dst, uint32(len(keys)))
		dst = append(dst, p.Name...)
		dst = append(dst, p.Version...)
		dst = append(dst, keys...)
	}
	return dst
}

// infoParamsDeclared is the info entry flag saying the plugin declares its params.
const infoParamsDeclared = 1

// CheckParamNames validates a params declaration: at most MaxParams keys, each a
// non-empty name of at most MaxNameLen bytes of [a-z0-9._-], none repeated.
func CheckParamNames(keys []string) error {
	if len(keys) > MaxParams {
		return fmt.Errorf("%d params declared, at most %d", len(keys), MaxParams)
	}
	seen := make(map[string]bool, len(keys))
	for _, k := range keys {
		if len(k) > MaxNameLen || !validName(k) || seen[k] {
			return fmt.Errorf("param %q: want a unique name of 1-%d bytes of [a-z0-9._-]", k, MaxNameLen)
		}
		seen[k] = true
	}
	return nil
}

// ParseInfo decodes and validates an info record: names non-empty, unique and at most
// MaxNameLen bytes of [a-z0-9._-], at least one role each, TopK ≥ 0.
func ParseInfo(b []byte) (ModuleInfo, error) {
	var m ModuleInfo
	r := reader{b: b}
	hdr := r.u32()
	major, minor := r.u16(), r.u16()
	n := r.u32()
	ehdr := r.u32()
	if r.err != nil || hdr < infoHdr || int(hdr) > len(b) {
		return m, headerError("info record", b, hdr, infoHdr, "hdr, ABI major and minor, n_plugins, entry_hdr")
	}
	m.ABIMajor, m.ABIMinor = int(major), int(minor)
	if n == 0 || n > MaxPlugins || ehdr < infoEntryHdrV2 {
		return m, fmt.Errorf("info record: %w: %d plugins, entry header %d", ErrMalformed, n, ehdr)
	}
	r.off = int(hdr)
	seen := map[string]bool{}
	for i := 0; i < int(n); i++ {
		start := r.off
		bits, topK, nl, vl := r.u32(), int32(r.u32()), r.u32(), r.u32()
		var flags, pl uint32
		if ehdr >= infoEntryHdr && minor >= 3 { // v1.3 (an older module's padding is not read)
			flags, pl = r.u32(), r.u32()
		}
		if r.err != nil || nl == 0 || nl > MaxNameLen || vl > MaxNameLen || pl > MaxParams*(MaxNameLen+1) {
			return m, fmt.Errorf("info record: %w: entry %d", ErrMalformed, i)
		}
		if flags&^infoParamsDeclared != 0 || flags == 0 && pl != 0 {
			return m, fmt.Errorf("info record: %w: entry %d: flags %#x with %d bytes of params (bit 0 declares params, other bits must be 0)", ErrMalformed, i, flags, pl)
		}
		r.off = start + int(ehdr)
		name, version, keys := string(r.bytes(int(nl))), string(r.bytes(int(vl))), string(r.bytes(int(pl)))
		if r.err != nil {
			return m, fmt.Errorf("info record: %w: entry %d truncated", ErrMalformed, i)
		}
		var params []string
		if keys != "" {
			params = strings.Split(keys, ",")
		}
		if err := CheckParamNames(params); err != nil {
			return m, fmt.Errorf("info record: %w: plugin %q: %v", ErrMalformed, name, err)
		}
		if !validName(name) || seen[name] {
			return m, fmt.Errorf("info record: %w: plugin name %q invalid or repeated", ErrMalformed, name)
		}
		seen[name] = true
		roles := RolesOf(bits)
		if len(roles) == 0 || bits&^roleBitsKnown != 0 || topK < 0 || bits&RoleBitDrafter != 0 && minor < 2 {
			return m, fmt.Errorf("info record: %w: plugin %q: roles %#x, top-k %d", ErrMalformed, name, bits, topK)
		}
		m.Plugins = append(m.Plugins, Info{Name: name, Version: version, Roles: roles,
			Needs: Needs{TopK: int(topK)}, ABIMajor: m.ABIMajor, ABIMinor: m.ABIMinor,
			Params: params, ParamsDeclared: flags&infoParamsDeclared != 0})
	}
	return m, nil
}

func validName(s string) bool {
	for _, c := range []byte(s) {
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.') {
			return false
		}
	}
	return s != ""
}

// AppendInitRequest encodes minfer_init's argument: the plugin name and its JSON params.
func AppendInitRequest(dst []byte, name string, params []byte) []byte {
	dst = le32(dst, initHdr)
	dst = le32(dst, uint32(len(name)))
	dst = le32(dst, uint32(len(params)))
	dst = append(dst, name...)
	return append(dst, params...)
}

// DecodeInitRequest is the guest side of AppendInitRequest. params aliases b.
func DecodeInitRequest(b []byte) (name string, params []byte, err error) {
	r := reader{b: b}
	hdr, nl, pl := r.u32(), r.u32(), r.u32()
	if r.err != nil || hdr < initHdr {
		return "", nil, fmt.Errorf("init: %w: header", ErrMalformed)
	}
	r.off = int(hdr)
	name = string(r.bytes(int(nl)))
	params = r.bytes(int(pl))
	if r.err != nil {
		return "", nil, fmt.Errorf("init: %w: truncated", ErrMalformed)
	}
	return name, params, nil
}

// AppendPolicyRequest encodes a RoundOutcome for minfer_policy_next.
func AppendPolicyRequest(dst []byte, o *RoundOutcome) []byte {
	dst = le32(dst, policyReqHdr)
	for _, v := range [...]int{o.Round, o.Depth, o.Drafted, o.Accepted, o.MaxDepth} {
		dst = le32(dst, uint32(int32(v)))
	}
	dst = binary.LittleEndian.AppendUint64(dst, uint64(o.DraftNs))
	dst = binary.LittleEndian.AppendUint64(dst, uint64(o.VerifyNs))
	dst = le32(dst, uint32(len(o.DraftConf)))
	dst = le32(dst, uint32(int32(o.Drafter)))
	dst = le32(dst, uint32(int32(o.Drafters)))
	dst = le32(dst, uint32(int32(o.BatchSeqs)))
	dst = le32(dst, uint32(int32(o.BatchRows)))
	dst = le32(dst, uint32(len(o.Offered)))
	for _, c := range o.DraftConf {
		dst = le32(dst, math.Float32bits(c))
	}
	for _, v := range o.Offered {
		dst = le32(dst, uint32(int32(v)))
	}
	return dst
}

// DecodePolicyRequest decodes into o, reusing o.DraftConf's storage.
func DecodePolicyRequest(b []byte, o *RoundOutcome) error {
	r := reader{b: b}
	hdr := r.u32()
	o.Round, o.Depth, o.Drafted = int(r.i32()), int(r.i32()), int(r.i32())
	o.Accepted, o.MaxDepth = int(r.i32()), int(r.i32())
	o.DraftNs, o.VerifyNs = int64(r.u64()), int64(r.u64())
	n := r.u32()
	o.Drafter, o.Drafters, o.BatchSeqs, o.BatchRows = 0, 0, 0, 0
	if hdr >= policyReqHdrV2 { // v1.2
		o.Drafter, o.Drafters = int(r.i32()), int(r.i32())
	}
	if hdr >= policyReqHdrV3 { // v1.3
		o.BatchSeqs, o.BatchRows = int(r.i32()), int(r.i32())
	}
	nOffered := uint32(0)
	if hdr >= policyReqHdr { // v1.4
		nOffered = r.u32()
	}
	if r.err != nil || hdr < policyReqHdrV1 {
		return fmt.Errorf("policy request: %w: header", ErrMalformed)
	}
	if nOffered > MaxDrafters {
		return fmt.Errorf("policy request: %w: %d offers, at most %d drafters", ErrMalformed, nOffered, MaxDrafters)
	}
	r.off = int(hdr)
	o.DraftConf = readWords(&r, o.DraftConf[:0], n)
	if r.err != nil {
		return fmt.Errorf("policy request: %w: %d confidences", ErrMalformed, n)
	}
	o.Offered = o.Offered[:0]
	for range nOffered {
		o.Offered = append(o.Offered, int(r.i32()))
	}
	if r.err != nil {
		return fmt.Errorf("policy request: %w: %d offers", ErrMalformed, nOffered)
	}
	if nOffered == 0 {
		o.Offered = nil
	}
	return nil
}

// AppendPolicyResponse encodes a DepthDecision.
func AppendPolicyResponse(dst []byte, d DepthDecision) []byte {
	dst = le32(dst, policyRespHdr)
	dst = le32(dst, uint32(int32(d.Depth)))
	dst = le32(dst, math.Float32bits(d.MinConf))
	var flags uint32
	if d.KeepCut {
		flags |= policyKeepCut
	}
	dst = le32(dst, flags)
	return le32(dst, uint32(int32(d.Drafter)))
}

// policyKeepCut is the keep_cut bit of a policy response's flags.
const policyKeepCut = 1

// DecodePolicyResponse decodes and validates a DepthDecision: 0 ≤ Depth ≤
// MaxDepthLimit, MinConf in [0, 1], no unknown flag, 0 ≤ Drafter < MaxDrafters (the
// engine checks it against the sequence's drafters). A response of an earlier version
// reads the fields it lacks as zero: KeepCut false (hdr 12), Drafter 0 (hdr 16).
func DecodePolicyResponse(b []byte) (DepthDecision, error) {
	r := reader{b: b}
	hdr := r.u32()
	d := DepthDecision{Depth: int(r.i32()), MinConf: r.f32()}
	var flags uint32
	if hdr >= policyRespHdrV1 {
		flags = r.u32()
	}
	if hdr >= policyRespHdr {
		d.Drafter = int(r.i32())
	}
	if r.err != nil || hdr < policyRespHdrV0 || int(hdr) > len(b) {
		return DepthDecision{}, headerError("policy response", b, hdr, policyRespHdrV0, "hdr, depth, min_conf")
	}
	if flags&^policyKeepCut != 0 {
		return DepthDecision{}, fmt.Errorf("policy response: %w: unknown flags %#x", ErrMalformed, flags&^policyKeepCut)
	}
	d.KeepCut = flags&policyKeepCut != 0
	if d.Depth < 0 || d.Depth > MaxDepthLimit {
		return DepthDecision{}, fmt.Errorf("policy response: %w: depth %d outside [0, %d]", ErrMalformed, d.Depth, MaxDepthLimit)
	}
	if !(d.MinConf >= 0 && d.MinConf <= 1) {
		return DepthDecision{}, fmt.Errorf("policy response: %w: min_conf %v outside [0, 1]", ErrMalformed, d.MinConf)
	}
	if d.Drafter < 0 || d.Drafter >= MaxDrafters {
		return DepthDecision{}, fmt.Errorf("policy response: %w: drafter %d outside [0, %d)", ErrMalformed, d.Drafter, MaxDrafters)
	}
	return d, nil
}

// AppendDraftRequest encodes a DraftRequest for minfer_draft.
func AppendDraftRequest(dst []byte, q *DraftRequest) []byte {
	dst = le32(dst, draftReqHdr)
	dst = le32(dst, uint32(q.MaxDepth))
	dst = le32(dst, uint32(q.Vocab))
	dst = le32(dst, uint32(len(q.Appended)))
	return appendWords(dst, q.Appended)
}

// DecodeDraftRequest decodes into q, reusing q.Appended's storage.
func DecodeDraftRequest(b []byte, q *DraftRequest) error {
	r := reader{b: b}
	hdr, maxD, vocab, n := r.u32(), r.u32(), r.u32(), r.u32()
	if r.err != nil || hdr < draftReqHdr || maxD > MaxDepthLimit || vocab > math.MaxInt32 {
		return fmt.Errorf("draft request: %w: header", ErrMalformed)
	}
	q.MaxDepth, q.Vocab = int(maxD), int(vocab)
	r.off = int(hdr)
	q.Appended = readWords(&r, q.Appended[:0], n)
	if r.err != nil {
		return fmt.Errorf("draft request: %w: %d appended tokens", ErrMalformed, n)
	}
	return nil
}

// AppendDraftResponse encodes a DraftResult (len(Conf) must equal len(Tokens)).
func AppendDraftResponse(dst []byte, res DraftResult) []byte {
	dst = le32(dst, draftRespHdr)
	dst = le32(dst, uint32(len(res.Tokens)))
	dst = appendWords(dst, res.Tokens)
	return appendWords(dst, res.Conf)
}

// DecodeDraftResponse decodes a DraftResult into res's storage and validates it against
// its request (CheckDraft): a drafter answering more tokens than asked, ids outside the
// vocabulary or confidences outside [0, 1] (NaN included) is malformed.
func DecodeDraftResponse(b []byte, q *DraftRequest, res *DraftResult) error {
	r := reader{b: b}
	hdr, n := r.u32(), r.u32()
	if r.err != nil || hdr < draftRespHdr || int(hdr) > len(b) {
		return headerError("draft response", b, hdr, draftRespHdr, "hdr, n")
	}
	if int64(n) > int64(q.MaxDepth) {
		return fmt.Errorf("draft response: %w: %d draft tokens, at most %d were asked for", ErrMalformed, n, q.MaxDepth)
	}
	r.off = int(hdr)
	res.Tokens = readWords(&r, res.Tokens[:0], n)
	res.Conf = readWords(&r, res.Conf[:0], n)
	if r.err != nil {
		return fmt.Errorf("draft response: %w: truncated (%d tokens)", ErrMalformed, n)
	}
	if err := CheckDraft(q, *res); err != nil {
		return fmt.Errorf("draft response: %w: %v", ErrMalformed, err)
	}
	return nil
}

// AppendPenaltyRequest encodes the rows for minfer_penalty_apply. Each row's IDs and
// Logits must have the same length.
func AppendPenaltyRequest(dst []byte, rows []PenaltyRow) []byte {
	dst = le32(dst, penaltyReqHdr)
	dst = le32(dst, uint32(len(rows)))
	dst = le32(dst, penaltyRowHdr)
	for i := range rows {
		row := &rows[i]
		dst = le32(dst, uint32(len(row.History)))
		dst = le32(dst, uint32(len(row.IDs)))
		dst = appendWords(dst, row.History)
		dst = appendWords(dst, row.IDs)
		dst = appendWords(dst, row.Logits)
	}
	return dst
}

// DecodePenaltyRequest decodes into rows (reusing its storage) and returns them.
func DecodePenaltyRequest(b []byte, rows []PenaltyRow) ([]PenaltyRow, error) {
	r := reader{b: b}
	hdr, n, rhdr := r.u32(), r.u32(), r.u32()
	if r.err != nil || hdr < penaltyReqHdr || rhdr < penaltyRowHdr || uint64(n)*penaltyRowHdr > uint64(len(b)) {
		return rows[:0], fmt.Errorf("penalty request: %w: header", ErrMalformed)
	}
	r.off = int(hdr)
	rows = grow(rows, int(n))
	for i := range rows {
		start := r.off
		nh, ni := r.u32(), r.u32()
		r.off = start + int(rhdr)
		row := &rows[i]
		row.History = readWords(&r, row.History[:0], nh)
		row.IDs = readWords(&r, row.IDs[:0], ni)
		row.Logits = readWords(&r, row.Logits[:0], ni)
		if r.err != nil {
			return rows[:0], fmt.Errorf("penalty request: %w: row %d", ErrMalformed, i)
		}
	}
	return rows, nil
}

// AppendPenaltyResponse encodes the adjusted logits of rows.
func AppendPenaltyResponse(dst []byte, rows []PenaltyRow) []byte {
	dst = le32(dst, penaltyRespHdr)
	dst = le32(dst, uint32(len(rows)))
	dst = le32(dst, penaltyRespRow)
	for i := range rows {
		dst = le32(dst, uint32(len(rows[i].Logits)))
		dst = appendWords(dst, rows[i].Logits)
	}
	return dst
}

// DecodePenaltyResponse writes the response's logits into rows[i].Logits. The row count
// and each row's logit count must equal the request's; no logit may be NaN or +Inf. On
// error rows are left unchanged.
func DecodePenaltyResponse(b []byte, rows []PenaltyRow) error {
	for pass := 0; pass < 2; pass++ { // validate everything, then write
		r := reader{b: b}
		hdr, n, rhdr := r.u32(), r.u32(), r.u32()
		if r.err != nil || hdr < penaltyRespHdr || rhdr < penaltyRespRow {
			if hdr >= penaltyRespHdr && r.err == nil {
				return fmt.Errorf("penalty response: %w: row_hdr %d, below the minimum %d (n_ids)", ErrMalformed, rhdr, penaltyRespRow)
			}
			return headerError("penalty response", b, hdr, penaltyRespHdr, "hdr, n_rows, row_hdr")
		}
		if int(n) != len(rows) {
			return fmt.Errorf("penalty response: %w: %d rows, want %d", ErrMalformed, n, len(rows))
		}
		r.off = int(hdr)
		for i := range rows {
			start := r.off
			k := r.u32()
			r.off = start + int(rhdr)
			if r.err != nil || int(k) != len(rows[i].Logits) {
				return fmt.Errorf("penalty response: %w: row %d has %d logits, want %d", ErrMalformed, i, k, len(rows[i].Logits))
			}
			for j := range rows[i].Logits {
				v := r.f32()
				if r.err != nil {
					return fmt.Errorf("penalty response: %w: row %d truncated", ErrMalformed, i)
				}
				if v != v || math.IsInf(float64(v), 1) {
					return fmt.Errorf("penalty response: %w: row %d logit %d is %v", ErrMalformed, i, j, v)
				}
				if pass == 1 {
					rows[i].Logits[j] = v
				}
			}
		}
	}
	return nil
}

// AppendSampleRequest encodes a SampleRound for minfer_sample.
func AppendSampleRequest(dst []byte, s *SampleRound) []byte {
	dst = le32(dst, sampleReqHdr)
	dst = le32(dst, uint32(len(s.Rows)))
	dst = le32(dst, uint32(len(s.Draft)))
	dst = le32(dst, sampleRowHdr)
	dst = binary.LittleEndian.AppendUint64(dst, s.Seed)
	dst = binary.LittleEndian.AppendUint64(dst, s.Step)
	dst = appendWords(dst, s.Draft)
	for i := range s.Rows {
		row := &s.Rows[i]
		dst = le32(dst, uint32(len(row.IDs)))
		dst = le32(dst, math.Float32bits(row.DraftLogit))
		dst = le32(dst, math.Float32bits(row.MaxLogit))
		dst = le32(dst, math.Float32bits(row.LogSumExp))
		dst = appendWords(dst, row.IDs)
		dst = appendWords(dst, row.Logits)
	}
	return dst
}

// DecodeSampleRequest decodes into s, reusing its storage. It checks that there is one
// more row than draft tokens.
func DecodeSampleRequest(b []byte, s *SampleRound) error {
	r := reader{b: b}
	hdr, nr, nd, rhdr := r.u32(), r.u32(), r.u32(), r.u32()
	s.Seed, s.Step = r.u64(), r.u64()
	if r.err != nil || hdr < sampleReqHdr || rhdr < sampleRowHdr || nr != nd+1 ||
		uint64(nr)*sampleRowHdr > uint64(len(b)) {
		return fmt.Errorf("sample request: %w: header (%d rows, %d draft tokens)", ErrMalformed, nr, nd)
	}
	r.off = int(hdr)
	s.Draft = readWords(&r, s.Draft[:0], nd)
	s.Rows = grow(s.Rows, int(nr))
	for i := range s.Rows {
		start := r.off
		row := &s.Rows[i]
		k := r.u32()
		row.DraftLogit, row.MaxLogit, row.LogSumExp = r.f32(), r.f32(), r.f32()
		r.off = start + int(rhdr)
		row.IDs = readWords(&r, row.IDs[:0], k)
		row.Logits = readWords(&r, row.Logits[:0], k)
		if r.err != nil {
			return fmt.Errorf("sample request: %w: row %d", ErrMalformed, i)
		}
	}
	return nil
}

// AppendSampleResponse encodes a SampleResult.
func AppendSampleResponse(dst []byte, res SampleResult) []byte {
	dst = le32(dst, sampleRespHdr)
	dst = le32(dst, uint32(int32(res.Accepted)))
	return le32(dst, uint32(res.Next))
}

// DecodeSampleResponse decodes and validates a SampleResult against its round:
// 0 ≤ Accepted ≤ len(Draft), and Next is one of the candidates of row Accepted (any id
// in [0, len(IDs)) when that row is a full row, Needs.TopK == 0).
func DecodeSampleResponse(b []byte, s *SampleRound) (SampleResult, error) {
	r := reader{b: b}
	hdr := r.u32()
	res := SampleResult{Accepted: int(r.i32()), Next: r.i32()}
	if r.err != nil || hdr < sampleRespHdr || int(hdr) > len(b) {
		return SampleResult{}, headerError("sample response", b, hdr, sampleRespHdr, "hdr, accepted, next")
	}
	if res.Accepted < 0 || res.Accepted > len(s.Draft) || res.Accepted >= len(s.Rows) {
		return SampleResult{}, fmt.Errorf("sample response: %w: accepted %d of %d draft tokens", ErrMalformed, res.Accepted, len(s.Draft))
	}
	if !contains(s.Rows[res.Accepted].IDs, res.Next) {
		return SampleResult{}, fmt.Errorf("sample response: %w: next token %d is not a candidate of row %d", ErrMalformed, res.Next, res.Accepted)
	}
	return res, nil
}

func contains(ids []int32, id int32) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}

func le32(dst []byte, v uint32) []byte { return binary.LittleEndian.AppendUint32(dst, v) }

// littleEndian hosts (amd64, arm64, wasm) copy arrays as bytes: in WebAssembly a
// per-element loop costs tens of ns per value.
var littleEndian = binary.NativeEndian.Uint16([]byte{1, 0}) == 1

// word is a 4-byte value the ABI carries as its little-endian bits.
type word interface{ int32 | float32 }

// appendWords appends v's values as little-endian 4-byte words.
func appendWords[T word](dst []byte, v []T) []byte {
	if len(v) == 0 {
		return dst
	}
	if littleEndian {
		return append(dst, unsafe.Slice((*byte)(unsafe.Pointer(&v[0])), 4*len(v))...)
	}
	for i := range v {
		dst = le32(dst, *(*uint32)(unsafe.Pointer(&v[i])))
	}
	return dst
}

func grow[T any](s []T, n int) []T {
	if cap(s) < n {
		s = append(s[:cap(s)], make([]T, n-cap(s))...)
	}
	return s[:n]
}

// reader reads little-endian fields, latching the first out-of-bounds error.
// headerError says what is wrong with a message's fixed header: a message too short
// for its hdr word, a hdr below the message's minimum (the v1.0 header, whose fields
// every version has: min bytes holding fields), a hdr beyond the message, or a message
// shorter than the fields its hdr promises.
func headerError(what string, b []byte, hdr uint32, min int, fields string) error {
	switch {
	case len(b) < 4:
		return fmt.Errorf("%s: %w: %d bytes, too short for its u32 hdr", what, ErrMalformed, len(b))
	case int64(hdr) < int64(min):
		return fmt.Errorf("%s: %w: hdr %d, below the minimum %d (%s)", what, ErrMalformed, hdr, min, fields)
	case int64(hdr) > int64(len(b)):
		return fmt.Errorf("%s: %w: hdr %d, but the message has %d bytes", what, ErrMalformed, hdr, len(b))
	}
	return fmt.Errorf("%s: %w: %d bytes, shorter than the fields its hdr %d holds (%s)", what, ErrMalformed, len(b), hdr, fields)
}

type reader struct {
	b   []byte
	off int
	err error
}

func (r *reader) need(n int) bool {
	if r.err != nil || n < 0 || r.off < 0 || r.off > len(r.b) || n > len(r.b)-r.off {
		r.err = ErrMalformed
		return false
	}
	return true
}

func (r *reader) u16() uint16 {
	if !r.need(2) {
		return 0
	}
	v := binary.LittleEndian.Uint16(r.b[r.off:])
	r.off += 2
	return v
}

func (r *reader) u32() uint32 {
	if !r.need(4) {
		return 0
	}
	v := binary.LittleEndian.Uint32(r.b[r.off:])
	r.off += 4
	return v
}

func (r *reader) i32() int32   { return int32(r.u32()) }
func (r *reader) f32() float32 { return math.Float32frombits(r.u32()) }

func (r *reader) u64() uint64 {
	if !r.need(8) {
		return 0
	}
	v := binary.LittleEndian.Uint64(r.b[r.off:])
	r.off += 8
	return v
}

func (r *reader) bytes(n int) []byte {
	if !r.need(n) {
		return nil
	}
	v := r.b[r.off : r.off+n]
	r.off += n
	return v
}

// readWords appends n little-endian 4-byte words read from r to dst.
func readWords[T word](r *reader, dst []T, n uint32) []T {
	if uint64(n)*4 > uint64(len(r.b)) || !r.need(int(n)*4) {
		r.err = ErrMalformed
		return dst
	}
	src := r.b[r.off : r.off+4*int(n)]
	r.off += 4 * int(n)
	start := len(dst)
	dst = grow(dst, start+int(n))
	if littleEndian && n > 0 {
		copy(unsafe.Slice((*byte)(unsafe.Pointer(&dst[start])), len(src)), src)
		return dst
	}
	for i := range dst[start:] {
		*(*uint32)(unsafe.Pointer(&dst[start+i])) = binary.LittleEndian.Uint32(src[4*i:])
	}
	return dst
}
