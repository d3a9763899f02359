package broker

import "time"

// syncer fsyncs both logs (in parallel) when the actor asks, and hands the
// durable points back through the control stack. While the actor has
// written more than the last fsync covered, it starts the next fsync at
// once instead of waiting for the actor to take the result and ask again:
// an actor busy with a long round (the completions of a slow fsync) must
// not hold up the fsync that its next confirms wait for.
func (p *partition) syncer() {
	defer close(p.syncDone)
	for {
		select {
		case <-p.syncReq:
		case <-p.syncStop:
			return
		}
		for more := true; more; {
			before := p.data.Durable()
			t0 := time.Now()
			d, e, derr, eerr := p.syncBoth()
			failed := derr != nil || eerr != nil
			if !failed {
				p.t.b.observeSync(time.Since(t0), int(max(d, before)-before))
			}
			more = !failed && !p.stopRequested() && p.syncBehind()
			p.control(func(p *partition) { p.synced(d, e, derr, eerr, more) })
		}
	}
}

// syncBehind reports whether a log has records written by a finished
// round that are not durable yet.
func (p *partition) syncBehind() bool {
	return p.data.Durable() < Seq(p.wantData.Load()) || p.events.Durable() < Seq(p.wantEvents.Load())
}

func (p *partition) stopRequested() bool {
	select {
	case <-p.syncStop:
		return true
	default:
		return false
	}
}

func (p *partition) syncBoth() (data, events Seq, dataErr, eventsErr error) {
	// Only a log behind its target needs an fsync; with one, no goroutine.
	needData := p.data.Durable() < Seq(p.wantData.Load())
	needEvents := p.events.Durable() < Seq(p.wantEvents.Load())
	switch {
	case !needEvents:
		data, dataErr = p.data.Sync()
		return data, p.events.Durable(), dataErr, nil
	case !needData:
		events, eventsErr = p.events.Sync()
		return p.data.Durable(), events, nil, eventsErr
	}
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		events, eventsErr = p.events.Sync()
	}()
	data, dataErr = p.data.Sync()
	<-ch
	return data, events, dataErr, eventsErr
}
