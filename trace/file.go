package trace

import (
	"bufio"
	"compress/gzip"
	"io"
	"os"
	"strings"
)

// Encode writes events to w as JSONL in the trace format, gzipped when
// compress is set.
func Encode(w io.Writer, events []Event, compress bool) error {
	bw := bufio.NewWriter(w)
	var dst io.Writer = bw
	var zw *gzip.Writer
	if compress {
		zw = gzip.NewWriter(bw)
		dst = zw
	}
	for _, ev := range events {
		if err := EncodeLine(dst, ev); err != nil {
			return err
		}
	}
	if zw != nil {
		if err := zw.Close(); err != nil {
			return err
		}
	}
	return bw.Flush()
}

// WriteFile writes events to the file name (mode 0644) as JSONL, gzipped
// when the name ends in .gz. The file is replaced only once it is
// complete: the events go to a temporary file beside it, renamed over it
// at the end, so a failure leaves the old file (or none) in place.
func WriteFile(name string, events []Event) (err error) {
	f, err := os.CreateTemp(dirOf(name), ".trace-*")
	if err != nil {
		return err
	}
	defer func() {
		if err != nil {
			f.Close()
			os.Remove(f.Name())
		}
	}()
	if err := f.Chmod(0o644); err != nil {
		return err
	}
	if err := Encode(f, events, strings.HasSuffix(name, ".gz")); err != nil {
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	return os.Rename(f.Name(), name)
}

// dirOf is the directory of name, with either slash as the separator.
func dirOf(name string) string {
	i := strings.LastIndexAny(name, `/\`)
	if i < 0 {
		return "."
	}
	if i == 0 {
		return "/"
	}
	return name[:i]
}
