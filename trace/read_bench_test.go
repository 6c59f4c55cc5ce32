package trace

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"strings"
	"testing"
)

// BenchmarkRead measures the reader's hot path: decoding call lines.
// "synthetic" is 2,000 calls with 1 KiB outputs; "shared" is the shared
// minisweagent call trace (../shared/traces), skipped when absent.
func BenchmarkRead(b *testing.B) {
	var synth bytes.Buffer
	out := strings.Repeat(`{\"k\": \"value\"}, `, 64)
	for i := range 2000 {
		fmt.Fprintf(&synth, `{"session":"s%d","seq":%d,"step":%d,"tool":"get_user_details","args":{"user_id":"u_%d","verbose":true},"status":"ok","output":"%s","requestor":"assistant","call_id":"c%d","ts":"2026-01-01T00:00:00Z","duration_ms":0.4,"llm_ms":812.5}`+"\n", i/20, i%20, i%20+1, i, out, i)
	}
	inputs := []struct {
		name string
		data []byte
	}{{"synthetic", synth.Bytes()}}
	if f, err := os.Open("../../shared/traces/minisweagent-train.jsonl.gz"); err == nil {
		zr, err := gzip.NewReader(f)
		if err == nil {
			if data, err := io.ReadAll(zr); err == nil {
				inputs = append(inputs, struct {
					name string
					data []byte
				}{"shared", data})
			}
		}
		f.Close()
	}
	for _, in := range inputs {
		b.Run(in.name, func(b *testing.B) {
			b.SetBytes(int64(len(in.data)))
			b.ReportAllocs()
			for b.Loop() {
				for _, err := range NewReader(nil).Read(in.name, bytes.NewReader(in.data)) {
					if err != nil {
						b.Fatal(err)
					}
				}
			}
		})
	}
}
