package server

// The network layer's part of the stage accounting (server/stagetime,
// issue 30): each read of a connection is a sample origin; its first
// durable PUB and its first settle (ACK, NACK, ...) carry it through the
// engine, at most one of each per the recorder's gap server-wide
// (stagetime.DefaultGap, or the gap of Options.Engine.Stages when set). The read's time is the one feedFrames reads anyway for the
// heartbeat, so a read costs no clock read of its own; a sampled command
// costs one per stage it reaches here. A POLL answer samples its first
// delivery; a push subscription every pushSampleEvery-th (a clock read per
// delivery would cost more than the rest of the accounting).

import (
	"time"

	"github.com/fibrilmq/fibril/server/stagetime"
)

// pushSampleEvery: one push delivery in this many is a stage sample.
const pushSampleEvery = 64

// stageSample is a connection's sample of its current read (input
// goroutine only): when the read was taken, and whether its first durable
// PUB and its first settle have taken it.
type stageSample struct {
	at       int64 // stagetime.Now of the read
	pubTaken bool
	setTaken bool
}

// begin starts the sample of a read made at t.
func (s *stageSample) begin(t time.Time) { *s = stageSample{at: stagetime.Mono(t)} }

// pub returns the read's origin for its first durable PUB when r's gate
// lets it be a sample, 0 for the rest.
func (s *stageSample) pub(r *stagetime.Recorder) int64 {
	if s.pubTaken {
		return 0
	}
	s.pubTaken = true
	return r.SamplePub(s.at)
}

// settle is pub for the read's first settle.
func (s *stageSample) settle(r *stagetime.Recorder) int64 {
	if s.setTaken {
		return 0
	}
	s.setTaken = true
	return r.SampleSettle(s.at)
}

// stages is the server's stage recorder (nil without the durable engine:
// every observation is then ignored).
func (s *Server) stages() *stagetime.Recorder {
	if s.durable == nil {
		return nil
	}
	return s.durable.stages
}
