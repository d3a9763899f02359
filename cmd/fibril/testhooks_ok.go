//go:build !fibril_broken_nosync

package main

// brokenNoSync is false in every real build (testhooks.go).
const brokenNoSync = false
