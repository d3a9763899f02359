package broker

import (
	"bytes"
	"strconv"

	"github.com/fibrilmq/fibril/wire"
)

// sendDeadLetters copies due dead letters to their groups' dead-letter
// topics. The source offset is settled only when the copy is durable (the
// callback comes back through the control stack); if the dead-letter
// partition's ring is full the copy is retried on a timer. A crash in
// between re-sends it on open (at least once).
func (p *partition) sendDeadLetters() {
	p.dlqRetry = false
	for _, gp := range p.order {
		if len(gp.dlq) == 0 {
			continue
		}
		todo := gp.dlq
		gp.dlq = nil
		dest := gp.g.cfg.DeadLetter
		var dt *Topic
		if dest != "-" {
			dt, _ = p.t.b.Topic(TopicName(dest))
		}
		for i, dl := range todo {
			if dt == nil {
				if dest != "-" {
					p.t.b.logf("topic %s partition %d: dead-letter topic %s is gone; offset %d of group %s dropped",
						p.t.name, p.idx, dest, dl.seq, gp.g.name)
				}
				gp.deadLettered(dl.seq)
				continue
			}
			rec, err := p.data.Read(dl.seq)
			var hdrLen int
			var subject string
			if err == nil {
				hdrLen, subject, err = decodeMeta(rec.Meta)
			}
			if err != nil || hdrLen > len(rec.Data) {
				gp.deadLettered(dl.seq) // record gone: nothing to copy
				continue
			}
			hdr := dlqHeader(rec.Data[:hdrLen], reasonText(dl.reason), "", subject, p.idx, dl.seq, dl.attempts)
			if int64(len(hdr)+len(rec.Data)-hdrLen) > dt.maxBody() {
				p.t.b.logf("topic %s partition %d: offset %d of group %s does not fit in dead-letter topic %s; dropped",
					p.t.name, p.idx, dl.seq, gp.g.name, dest)
				gp.deadLettered(dl.seq)
				continue
			}
			body := make([]byte, 0, len(hdr)+len(rec.Data)-hdrLen)
			body = append(append(body, hdr...), rec.Data[hdrLen:]...)
			seq, gid := dl.seq, gp.id
			c := command{kind: cmdPublish, subject: dest, hdrLen: len(hdr), body: body}
			c.pubDone = PublishFunc(func(_ Position, err error) {
				p.control(func(p *partition) {
					g := p.groups[gid]
					if g == nil {
						return
					}
					if err != nil {
						g.dlq = append(g.dlq, dl)
						p.dlqRetry = true
						return
					}
					g.deadLettered(seq)
				})
			})
			if err := dt.partFor(nil).push(&c); err != nil {
				gp.dlq = append(gp.dlq, todo[i:]...)
				p.dlqRetry = true
				break
			}
		}
	}
}

// dlqHeader returns a NATS/1.0 header block: the original header lines plus
// Fibril-Reason, Fibril-Error (only when detail is not empty),
// Fibril-Subject, Fibril-Partition, Fibril-Seq and Fibril-Deliveries.
func dlqHeader(orig []byte, reason, detail, subject string, part Partition, seq Seq, deliveries uint32) []byte {
	var b []byte
	if bytes.HasPrefix(orig, []byte(wire.HeaderPrefix)) {
		b = append(b, bytes.TrimSuffix(orig, []byte("\r\n"))...) // keep lines, drop the blank one
		if !bytes.HasSuffix(b, []byte("\r\n")) {
			b = append(b, "\r\n"...)
		}
	} else {
		b = append(b, wire.HeaderPrefix+"\r\n"...)
	}
	b = wire.AppendHeaderField(b, wire.HeaderReason, reason)
	if detail != "" {
		b = wire.AppendHeaderField(b, wire.HeaderError, detail)
	}
	b = wire.AppendHeaderField(b, wire.HeaderSubject, subject)
	b = wire.AppendHeaderField(b, wire.HeaderPartition, strconv.FormatUint(uint64(part), 10))
	b = wire.AppendHeaderField(b, wire.HeaderSeq, strconv.FormatUint(uint64(seq), 10))
	b = wire.AppendHeaderField(b, wire.HeaderDeliveries, strconv.FormatUint(uint64(deliveries), 10))
	return append(b, "\r\n"...)
}
