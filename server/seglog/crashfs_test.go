package seglog

import "github.com/fibrilmq/fibril/internal/crashfs"

// newCrashFS returns a crash-simulating file system over the operating
// system's, for Options.FS.
func newCrashFS() *crashfs.FS { return crashfs.New(osFS{}) }
