package offsetclock

import (
	"os"
	"path/filepath"
	"testing"
	"time"
)

func TestClockFollowsTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offset")
	c, err := Open(path, 5*time.Millisecond)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if c.Offset() != 0 {
		t.Fatalf("no file: offset %v", c.Offset())
	}
	for _, want := range []time.Duration{time.Hour, -time.Hour, 0} {
		if err := Write(path, want); err != nil {
			t.Fatal(err)
		}
		deadline := time.Now().Add(5 * time.Second)
		for c.Offset() != want {
			if time.Now().After(deadline) {
				t.Fatalf("offset %v, want %v", c.Offset(), want)
			}
			time.Sleep(time.Millisecond)
		}
		if d := c.Now().Sub(time.Now()) - want; d < -time.Second || d > time.Second {
			t.Fatalf("Now is %v off the wanted offset %v", d, want)
		}
	}
}

func TestClockRefusesGarbage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "offset")
	if err := os.WriteFile(path, []byte("soon"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(path, time.Second); err == nil {
		t.Fatal("a garbage offset file was accepted")
	}
}
