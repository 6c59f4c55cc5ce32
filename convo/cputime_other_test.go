//go:build !unix

package convo

import (
	"testing"
	"time"
)

// cpuTime is not measured here.
func cpuTime() time.Duration { return 0 }

// reportCPU reports nothing here.
func reportCPU(*testing.B, time.Duration) {}
