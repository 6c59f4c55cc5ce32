package trace

import (
	"context"
	"fmt"
	"os"
)

// Importer reads one transcript file of a known format into events.
type Importer func(name string, data []byte, opts *ImportOptions, stats *ImportStats) ([]Event, error)

// ImporterFor returns the importer of a transcript format, by the name
// `ahead traces import --from` takes: the openai importer reads Responses
// items too.
func ImporterFor(from string) (Importer, bool) {
	switch from {
	case FormatOpenAI, FormatResponses:
		return ImportOpenAI, true
	case FormatAnthropic:
		return ImportAnthropic, true
	}
	return nil, false
}

// ImportFiles reads the transcript files names as format from (see
// ImporterFor), adding to stats. A file that fails to parse, or that parses
// with no tool call at all while it looks like another format's
// transcripts (Sniff), is an error naming both formats: a file of the
// wrong format must not become a trace nothing can mine.
func ImportFiles(ctx context.Context, names []string, from string, opts *ImportOptions, stats *ImportStats) ([]Event, error) {
	importFile, ok := ImporterFor(from)
	if !ok {
		return nil, fmt.Errorf("trace: unknown transcript format %q", from)
	}
	var events []Event
	for _, name := range names {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		data, err := os.ReadFile(name)
		if err != nil {
			return nil, err
		}
		calls := stats.Calls + stats.Bad
		evs, err := importFile(name, data, opts, stats)
		looks := Sniff(data)
		other := looks != "" && !readsFormat(from, looks)
		switch {
		case err != nil && other:
			return nil, fmt.Errorf("%w (read as --from %s; the file looks like %s transcripts: try --from %s)", err, from, looks, looks)
		case err != nil:
			return nil, err
		case stats.Calls+stats.Bad == calls && other:
			return nil, fmt.Errorf("%s: no tool calls found reading it as --from %s; it looks like %s transcripts (try --from %s)", name, from, looks, looks)
		}
		events = append(events, evs...)
	}
	return events, nil
}

// readsFormat reports whether the importer named from reads the format
// Sniff named: the openai importer reads Responses items too.
func readsFormat(from, sniffed string) bool {
	return sniffed == from || sniffed != FormatAnthropic && from != FormatAnthropic
}
