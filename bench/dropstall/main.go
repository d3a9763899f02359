// Command dropstall measures what dropping a written segment file costs the
// fsyncs of another file on the same disk: unlink (the blocks are freed) or
// fallocate ZERO_RANGE (the blocks stay allocated and read as zeros), which
// is how seglog recycles segments. It writes four 64 MiB files, then, while
// a writer appends 64 KiB + fdatasync to a fifth file in a loop, drops one
// file every 300 ms and reports how long each drop took and the writer's
// fdatasync percentiles.
//
//	go run ./bench/dropstall -dir /path/on/the/disk -mode unlink|zero|none
package main

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

const size = 64 << 20

func main() {
	dir := flag.String("dir", os.TempDir(), "directory on the disk to measure")
	mode := flag.String("mode", "unlink", "how to drop a file: unlink, zero (fallocate ZERO_RANGE) or none")
	flag.Parse()
	if err := run(*dir, *mode); err != nil {
		fmt.Fprintln(os.Stderr, "dropstall:", err)
		os.Exit(1)
	}
}

func run(parent, mode string) error {
	if mode != "unlink" && mode != "zero" && mode != "none" {
		return fmt.Errorf("unknown -mode %q", mode)
	}
	dir, err := os.MkdirTemp(parent, "dropstall")
	if err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	var victims []*os.File
	for i := range 4 {
		f, err := written(filepath.Join(dir, fmt.Sprintf("v%d", i)))
		if err != nil {
			return err
		}
		defer f.Close()
		victims = append(victims, f)
	}
	w, err := os.Create(filepath.Join(dir, "w"))
	if err != nil {
		return err
	}
	defer w.Close()
	if err := unix.Fallocate(int(w.Fd()), 0, 0, 4*size); err != nil {
		return err
	}
	if err := w.Sync(); err != nil {
		return err
	}
	time.Sleep(6 * time.Second) // past ext4's 5 s journal commit interval

	drops := make(chan time.Duration, len(victims))
	go func() {
		defer close(drops)
		for _, v := range victims {
			time.Sleep(300 * time.Millisecond)
			t := time.Now()
			switch mode {
			case "unlink":
				v.Close()
				os.Remove(v.Name())
			case "zero":
				unix.Fallocate(int(v.Fd()), unix.FALLOC_FL_ZERO_RANGE|unix.FALLOC_FL_KEEP_SIZE, 0, size)
				unix.Fsync(int(v.Fd()))
			}
			drops <- time.Since(t)
		}
	}()
	buf := make([]byte, 64<<10)
	var lats, dropTimes []time.Duration
	for off := int64(0); ; off += int64(len(buf)) {
		select {
		case d, ok := <-drops:
			if !ok {
				slices.Sort(lats)
				n := len(lats)
				fmt.Printf("mode %s: drops %v\n", mode, dropTimes)
				fmt.Printf("writer fdatasync (%d): p50 %v  p99 %v  max %v\n", n, lats[n/2], lats[n*99/100], lats[n-1])
				return nil
			}
			dropTimes = append(dropTimes, d.Round(100*time.Microsecond))
		default:
		}
		if _, err := w.WriteAt(buf, off%(4*size)); err != nil {
			return err
		}
		t := time.Now()
		if err := unix.Fdatasync(int(w.Fd())); err != nil {
			return err
		}
		lats = append(lats, time.Since(t))
		time.Sleep(500 * time.Microsecond)
	}
}

// written creates a file of size bytes whose blocks are all written.
func written(path string) (*os.File, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, err
	}
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	for off := int64(0); off < size; off += int64(len(buf)) {
		if _, err := f.WriteAt(buf, off); err != nil {
			f.Close()
			return nil, err
		}
	}
	return f, f.Sync()
}
