//go:build fibril_broken_nosync

package main

// brokenNoSync makes this a deliberately broken build (testhooks.go).
const brokenNoSync = true
