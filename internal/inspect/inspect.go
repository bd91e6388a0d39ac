// Package inspect describes a GGUF file for minfer inspect: its metadata, tensor table,
// totals and file type as text or JSON, and one tensor's values dequantized.
package inspect

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"

	"github.com/minfer/minfer/core/gguf"
	"github.com/minfer/minfer/core/quant"
)

// Options say what Write prints.
type Options struct {
	JSON    bool   // JSON instead of text
	Tensor  string // only this tensor ("" = the whole file)
	Dequant bool   // with Tensor: its values dequantized
	Items   int    // at most this many items of a metadata array
}

// Write prints what o asks about f (opened from path) to w.
func Write(ctx context.Context, w io.Writer, path string, f *gguf.File, o Options) error {
	bw := bufio.NewWriter(w)
	var err error
	if o.Tensor != "" {
		err = inspectTensor(ctx, bw, f, o)
	} else if o.JSON {
		err = writeJSON(bw, Summarize(path, f, o.Items))
	} else {
		printSummary(bw, path, f, o.Items)
	}
	if ferr := bw.Flush(); err == nil {
		err = ferr
	}
	return err
}

// FileTypeLabel names general.file_type (gguf.FileTypeName), or "" when the key is absent.
func FileTypeLabel(f *gguf.File) (uint64, string) {
	id, err := f.GetUint("general.file_type")
	if err != nil {
		return 0, ""
	}
	if name, ok := gguf.FileTypeName(id); ok {
		return id, name
	}
	return id, fmt.Sprintf("unknown(%d)", id)
}

// Summary is a file's description: what the text report prints, and --json's output.
type Summary struct {
	Path         string        `json:"path"`
	Size         int64         `json:"size"`
	Version      uint32        `json:"version"`
	Alignment    uint64        `json:"alignment"`
	DataOffset   uint64        `json:"data_offset"`
	Architecture string        `json:"architecture"`
	FileType     *FileTypeJSON `json:"file_type,omitempty"`
	Metadata     []KVJSON      `json:"metadata"`
	Tensors      []TensorJSON  `json:"tensors"`
	Totals       TotalsJSON    `json:"totals"`
}

// FileTypeJSON is general.file_type with its name.
type FileTypeJSON struct {
	ID   uint64 `json:"id"`
	Name string `json:"name"`
}

// KVJSON is one metadata key.
type KVJSON struct {
	Key   string `json:"key"`
	Type  string `json:"type"`
	Count *int   `json:"count,omitempty"` // arrays only
	Value any    `json:"value"`           // arrays: the first items only when Truncated
	// Truncated is true when Value holds only the first items of the array.
	Truncated bool `json:"truncated,omitempty"`
}

// TensorJSON describes one tensor.
type TensorJSON struct {
	Name   string   `json:"name"`
	Type   string   `json:"type"`
	Shape  []uint64 `json:"shape"`
	Offset uint64   `json:"offset"`
	Bytes  uint64   `json:"bytes"`
	Params uint64   `json:"params"`
}

// TotalsJSON sums the tensor table.
type TotalsJSON struct {
	Tensors int            `json:"tensors"`
	Params  uint64         `json:"params"`
	Bytes   uint64         `json:"bytes"`
	ByType  map[string]int `json:"by_type"`
}

// Summarize describes f (read from path), arrays cut to their first items entries.
func Summarize(path string, f *gguf.File, items int) Summary {
	s := Summary{
		Path: path, Size: f.Size(), Version: f.Version, Alignment: f.Alignment,
		DataOffset: f.DataOffset, Architecture: f.Arch(),
		Metadata: make([]KVJSON, 0, len(f.KVs)), Tensors: make([]TensorJSON, 0, len(f.Tensors)),
		Totals: TotalsJSON{Tensors: len(f.Tensors), ByType: map[string]int{}},
	}
	if id, name := FileTypeLabel(f); name != "" {
		s.FileType = &FileTypeJSON{ID: id, Name: name}
	}
	for _, kv := range f.KVs {
		k := KVJSON{Key: kv.Key, Type: kv.Value.TypeName()}
		k.Value, k.Truncated = jsonValue(kv.Value, items)
		if kv.Value.Type == gguf.TypeArray {
			n := kv.Value.Len()
			k.Count = &n
		}
		s.Metadata = append(s.Metadata, k)
	}
	for i := range f.Tensors {
		t := &f.Tensors[i]
		s.Tensors = append(s.Tensors, TensorJSON{Name: t.Name, Type: t.Type.String(), Shape: t.Dims,
			Offset: t.Offset, Bytes: t.Size, Params: t.Elements()})
		s.Totals.Params += t.Elements()
		s.Totals.Bytes += t.Size
		s.Totals.ByType[t.Type.String()]++
	}
	return s
}

// jsonValue converts v for encoding/json: arrays cut to their first items entries
// (truncated reports whether items were left out), non-finite floats as strings.
func jsonValue(v gguf.Value, items int) (any, bool) {
	if v.Type != gguf.TypeArray {
		if x, ok := v.Float(); ok && (math.IsNaN(x) || math.IsInf(x, 0)) {
			return strconv.FormatFloat(x, 'g', -1, 64), false
		}
		return v.V, false
	}
	n := v.Len()
	show := min(n, items)
	out := make([]any, show)
	for i := range show {
		out[i], _ = jsonValue(v.Index(i), items)
	}
	return out, show < n
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printSummary(w io.Writer, path string, f *gguf.File, items int) {
	s := Summarize(path, f, items)
	fmt.Fprintf(w, "file          %s (%s, GGUF v%d, alignment %d, data at %d)\n",
		path, HumanBytes(uint64(s.Size)), s.Version, s.Alignment, s.DataOffset)
	fmt.Fprintf(w, "architecture  %s\n", orDash(s.Architecture))
	if name, err := f.GetString("general.name"); err == nil {
		fmt.Fprintf(w, "name          %s\n", name)
	}
	if s.FileType != nil {
		fmt.Fprintf(w, "file type     %s (%d)\n", s.FileType.Name, s.FileType.ID)
	}
	fmt.Fprintf(w, "tensors       %d, %s params, %s", s.Totals.Tensors, HumanCount(s.Totals.Params), HumanBytes(s.Totals.Bytes))
	if len(s.Totals.ByType) > 0 {
		types := make([]string, 0, len(s.Totals.ByType))
		for t := range s.Totals.ByType {
			types = append(types, t)
		}
		sort.Strings(types)
		for i, t := range types {
			types[i] = fmt.Sprintf("%s %d", t, s.Totals.ByType[t])
		}
		fmt.Fprintf(w, " (%s)", strings.Join(types, ", "))
	}
	fmt.Fprintln(w)

	fmt.Fprintf(w, "\nmetadata (%d keys)\n", len(f.KVs))
	keyW := 0
	for _, kv := range f.KVs {
		keyW = max(keyW, len(kv.Key))
	}
	for _, kv := range f.KVs {
		val := kv.Value.Summary(items) // long arrays end "… (N items)"
		if len(val) > 200 {
			val = val[:200] + "…"
		}
		fmt.Fprintf(w, "  %-*s  %-8s  %s\n", keyW, kv.Key, kv.Value.TypeName(), val)
	}
	if len(f.Tensors) == 0 {
		return
	}
	fmt.Fprintf(w, "\ntensors (%d)\n", len(f.Tensors))
	nameW := len("name")
	for i := range f.Tensors {
		nameW = max(nameW, len(f.Tensors[i].Name))
	}
	fmt.Fprintf(w, "  %-*s  %-6s  %-18s  %12s\n", nameW, "name", "type", "shape", "bytes")
	for i := range f.Tensors {
		t := &f.Tensors[i]
		fmt.Fprintf(w, "  %-*s  %-6s  %-18s  %12d\n", nameW, t.Name, t.Type, ShapeString(t.Dims), t.Size)
	}
	fmt.Fprintf(w, "  %-*s  %-6s  %-18s  %12d\n", nameW, "total", "", HumanCount(s.Totals.Params)+" params", s.Totals.Bytes)
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// ShapeString writes dims as "4096 x 32000".
func ShapeString(dims []uint64) string {
	parts := make([]string, len(dims))
	for i, d := range dims {
		parts[i] = strconv.FormatUint(d, 10)
	}
	return strings.Join(parts, " x ")
}

// HumanBytes writes n bytes as "1.50 MiB".
func HumanBytes(n uint64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := uint64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.2f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

// HumanCount writes a count as "1.50 M".
func HumanCount(n uint64) string {
	switch {
	case n >= 1e9:
		return fmt.Sprintf("%.2f B", float64(n)/1e9)
	case n >= 1e6:
		return fmt.Sprintf("%.2f M", float64(n)/1e6)
	case n >= 1e3:
		return fmt.Sprintf("%.2f K", float64(n)/1e3)
	}
	return strconv.FormatUint(n, 10)
}

// inspectTensor describes o.Tensor and, with o.Dequant, prints its values.
func inspectTensor(ctx context.Context, w io.Writer, f *gguf.File, o Options) error {
	t, ok := f.Tensor(o.Tensor)
	if !ok {
		return fmt.Errorf("inspect: no tensor %q in the file (%d tensors; run without --tensor to list them)", o.Tensor, len(f.Tensors))
	}
	if !o.Dequant {
		info := TensorJSON{Name: t.Name, Type: t.Type.String(), Shape: t.Dims, Offset: t.Offset, Bytes: t.Size, Params: t.Elements()}
		if o.JSON {
			return writeJSON(w, info)
		}
		fmt.Fprintf(w, "name    %s\ntype    %s\nshape   %s (%d values, %d rows)\noffset  %d (file offset %d)\nbytes   %d\n",
			t.Name, t.Type, ShapeString(t.Dims), t.Elements(), t.Rows(), t.Offset, f.DataOffset+t.Offset, t.Size)
		return nil
	}
	if o.JSON {
		return writeTensorJSON(ctx, w, f, t)
	}
	return writeTensorText(ctx, w, f, t)
}

// DequantRows decodes t row by row (a row is Dims[0] values) and calls fn with each;
// row is reused between calls.
func DequantRows(ctx context.Context, f *gguf.File, t *gguf.TensorInfo, fn func(row []float32) error) error {
	n := uint64(1)
	if len(t.Dims) > 0 {
		n = t.Dims[0]
	}
	rows := t.Rows()
	if n == 0 || rows == 0 {
		return nil
	}
	if n > 1<<30 {
		return fmt.Errorf("inspect: tensor %q: row of %d values is too long to decode", t.Name, n)
	}
	rb, err := t.Type.RowBytes(int(n))
	if err != nil {
		return fmt.Errorf("inspect: tensor %q: %w", t.Name, err)
	}
	data := f.TensorData(t)
	row := make([]float32, n)
	for r := range rows {
		if r%4096 == 0 && ctx.Err() != nil {
			return ctx.Err()
		}
		off := r * uint64(rb)
		if err := quant.Dequantize(t.Type, row, data[off:off+uint64(rb)]); err != nil {
			return fmt.Errorf("inspect: tensor %q: %w", t.Name, err)
		}
		if err := fn(row); err != nil {
			return err
		}
	}
	return nil
}

// writeTensorJSON streams {"name","type","shape","values"}; non-finite values are null.
func writeTensorJSON(ctx context.Context, w io.Writer, f *gguf.File, t *gguf.TensorInfo) error {
	head, err := json.Marshal(struct {
		Name  string   `json:"name"`
		Type  string   `json:"type"`
		Shape []uint64 `json:"shape"`
	}{t.Name, t.Type.String(), t.Dims})
	if err != nil {
		return err
	}
	buf := append(head[:len(head)-1], `,"values":[`...)
	first := true
	err = DequantRows(ctx, f, t, func(row []float32) error {
		for _, v := range row {
			if !first {
				buf = append(buf, ',')
			}
			first = false
			buf = appendNumber(buf, v)
		}
		_, err := w.Write(buf)
		buf = buf[:0]
		return err
	})
	if err != nil {
		return err
	}
	_, err = w.Write(append(buf, "]}\n"...))
	return err
}

func appendNumber(b []byte, v float32) []byte {
	if math.IsNaN(float64(v)) || math.IsInf(float64(v), 0) {
		return append(b, "null"...)
	}
	return strconv.AppendFloat(b, float64(v), 'g', -1, 32)
}

func writeTensorText(ctx context.Context, w io.Writer, f *gguf.File, t *gguf.TensorInfo) error {
	fmt.Fprintf(w, "name   %s\ntype   %s\nshape  %s\n", t.Name, t.Type, ShapeString(t.Dims))
	lo, hi := math.Inf(1), math.Inf(-1)
	var sum, sq float64
	var count, nonFinite uint64
	err := DequantRows(ctx, f, t, func(row []float32) error {
		for _, v := range row {
			x := float64(v)
			if math.IsNaN(x) || math.IsInf(x, 0) {
				nonFinite++
				continue
			}
			lo, hi = min(lo, x), max(hi, x)
			sum += x
			sq += x * x
			count++
		}
		return nil
	})
	if err != nil {
		return err
	}
	if count > 0 {
		fmt.Fprintf(w, "stats  min %.6g  max %.6g  mean %.6g  rms %.6g", lo, hi, sum/float64(count), math.Sqrt(sq/float64(count)))
		if nonFinite > 0 {
			fmt.Fprintf(w, "  (%d NaN/Inf)", nonFinite)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "values")
	var i uint64
	var line []byte
	err = DequantRows(ctx, f, t, func(row []float32) error {
		for _, v := range row {
			if i%8 == 0 {
				line = fmt.Appendf(line[:0], "  [%d]", i)
			}
			line = append(line, ' ')
			line = strconv.AppendFloat(line, float64(v), 'g', 7, 32)
			i++
			if i%8 == 0 {
				line = append(line, '\n')
				if _, err := w.Write(line); err != nil {
					return err
				}
			}
		}
		return nil
	})
	if err == nil && i%8 != 0 {
		_, err = w.Write(append(line, '\n'))
	}
	return err
}
