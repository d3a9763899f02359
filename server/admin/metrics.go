package admin

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
)

// collector reads the engine's Info views at scrape time. It keeps no state:
// every value is read fresh, so a deleted topic simply disappears. Its many
// fields are one immutable descriptor per exported metric (the list on
// /metrics), built once; grouping them would only rename them.
type collector struct {
	s *Server

	up, info, conns                         *prometheus.Desc
	published, retained, unsettled, bytes   *prometheus.Desc
	firstSeq, lastSeq                       *prometheus.Desc
	groupLag, groupReady, groupInflight     *prometheus.Desc
	groupSettled, connInBytes, connOutBytes *prometheus.Desc
	connInMsgs, connOutMsgs                 *prometheus.Desc

	connsTotal, srvInBytes, srvOutBytes, srvInMsgs, srvOutMsgs  *prometheus.Desc
	groupDelivered, groupRedelivered, groupAcked, groupNacked   *prometheus.Desc
	groupRejected, groupDeadLettered, groupExpired, groupOldest *prometheus.Desc
	groupPaused, partBytes, partRestored                        *prometheus.Desc
	groupDamaged, diskFull, fileLimit                           *prometheus.Desc
	openPartitions                                              *prometheus.Desc
	scrubBytes, scrubPasses, scrubProgress, scrubDamage         *prometheus.Desc
}

func newCollector(s *Server) *collector {
	d := func(name, help string, labels ...string) *prometheus.Desc {
		return prometheus.NewDesc("fibril_"+name, help, labels, nil)
	}
	topic, part, group := []string{"topic"}, []string{"topic", "partition"}, []string{"topic", "group"}
	return &collector{
		s:             s,
		up:            d("engine_up", "1 when the durable engine is open."),
		info:          d("server_info", "Server name and version.", "server", "version"),
		conns:         d("connections", "Client connections now."),
		published:     d("topic_published_total", "Messages ever stored in the topic (sum of partition last sequences).", topic...),
		retained:      d("topic_messages", "Messages retained.", topic...),
		unsettled:     d("topic_unsettled_messages", "Messages some group has not settled.", topic...),
		bytes:         d("topic_bytes", "Estimated retained bytes.", topic...),
		firstSeq:      d("partition_first_seq", "First retained sequence of the partition.", part...),
		lastSeq:       d("partition_last_seq", "Last stored sequence of the partition.", part...),
		groupLag:      d("group_lag_messages", "Messages the group has not settled (in flight included).", group...),
		groupReady:    d("group_ready_messages", "Messages waiting for delivery to the group (lag minus in flight).", group...),
		groupInflight: d("group_inflight_messages", "Deliveries of the group whose lease is running.", group...),
		groupSettled:  d("group_settled_total", "Messages the group settled (acked or dead-lettered), derived as published minus lag.", group...),
		connInBytes:   d("connection_in_bytes_total", "Bytes received from current connections.", nil...),
		connOutBytes:  d("connection_out_bytes_total", "Bytes sent to current connections.", nil...),
		connInMsgs:    d("connection_in_msgs_total", "Messages received from current connections.", nil...),
		connOutMsgs:   d("connection_out_msgs_total", "Messages sent to current connections.", nil...),

		connsTotal:        d("server_connections_total", "Client connections accepted since the server started."),
		srvInBytes:        d("server_in_bytes_total", "Bytes received from clients since the server started."),
		srvOutBytes:       d("server_out_bytes_total", "Bytes sent to clients since the server started."),
		srvInMsgs:         d("server_in_msgs_total", "Messages (PUB/HPUB) received since the server started."),
		srvOutMsgs:        d("server_out_msgs_total", "Messages (MSG/HMSG) sent since the server started."),
		groupDelivered:    d("group_delivered_total", "Deliveries, redeliveries included, since the engine opened.", group...),
		groupRedelivered:  d("group_redelivered_total", "Deliveries with attempt > 1 since the engine opened.", group...),
		groupAcked:        d("group_acked_total", "Acks that settled a message since the engine opened.", group...),
		groupNacked:       d("group_nacked_total", "Nacks of leased deliveries since the engine opened.", group...),
		groupRejected:     d("group_rejected_total", "Rejects of leased deliveries since the engine opened.", group...),
		groupDeadLettered: d("group_dead_lettered_total", "Messages dead-lettered since the engine opened.", group...),
		groupExpired:      d("group_expired_total", "Leases that ran out since the engine opened.", group...),
		groupOldest:       d("group_oldest_unacked_seconds", "Age of the oldest message the group has not settled (0: none).", group...),
		groupPaused:       d("group_paused", "1 while the group is paused.", group...),
		partBytes:         d("partition_disk_bytes", "Bytes of the partition's files on disk.", part...),
		groupDamaged:      d("group_damaged_offset", "The damaged offset a group stopped at in a partition (present only while stopped): nothing at or past it is delivered until the data is restored or repaired.", "topic", "group", "partition"),
		diskFull:          d("disk_full", "1 while a log finds its disk full (publishes answered disk_full; the path is in the server log and /readyz).", nil...),
		fileLimit:         d("file_limit_errors_total", "Opens of topics or segments refused at the process's open-files limit (answered too_many_files) since the engine opened."),
		openPartitions:    d("open_partitions", "Partitions whose logs are open now (four files each; idle ones past --max-open-partitions close theirs)."),
		scrubBytes:        d("scrub_bytes_total", "Bytes of stored records the background scrub checked again since the engine opened."),
		scrubPasses:       d("scrub_passes_total", "Complete passes of the background scrub over every log since the engine opened."),
		scrubProgress:     d("scrub_progress_ratio", "How far the scrub's current pass is (0 to 1)."),
		scrubDamage:       d("scrub_damaged_segments", "Damaged segments the scrub found since the engine opened (stop, fibril verify, fibril repair)."),
		partRestored:      d("partition_restored_events", "Consumer events (deliveries, acks, nacks) the engine's start restored from their side copies in the data log: confirmed events an unclean stop took from the event log.", part...),
	}
}

// Describe implements prometheus.Collector.
func (c *collector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{
		c.up, c.info, c.conns, c.published, c.retained, c.unsettled, c.bytes,
		c.firstSeq, c.lastSeq, c.groupLag, c.groupReady, c.groupInflight, c.groupSettled,
		c.connInBytes, c.connOutBytes, c.connInMsgs, c.connOutMsgs,
		c.connsTotal, c.srvInBytes, c.srvOutBytes, c.srvInMsgs, c.srvOutMsgs,
		c.groupDelivered, c.groupRedelivered, c.groupAcked, c.groupNacked,
		c.groupRejected, c.groupDeadLettered, c.groupExpired, c.groupOldest,
		c.groupPaused, c.partBytes, c.partRestored, c.groupDamaged, c.diskFull, c.fileLimit,
		c.openPartitions, c.scrubBytes, c.scrubPasses, c.scrubProgress, c.scrubDamage,
	} {
		ch <- d
	}
}

// Collect implements prometheus.Collector.
func (c *collector) Collect(ch chan<- prometheus.Metric) {
	gauge := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, l...)
	}
	counter := func(d *prometheus.Desc, v float64, l ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, v, l...)
	}
	gauge(c.info, 1, c.s.opts.ServerName, c.s.opts.Version)
	if cs := c.s.opts.Conns; cs != nil {
		list := cs.Connections()
		gauge(c.conns, float64(len(list)))
		var ib, ob, im, om uint64
		for _, ci := range list {
			ib, ob, im, om = ib+ci.InBytes, ob+ci.OutBytes, im+ci.InMsgs, om+ci.OutMsgs
		}
		// Totals over the connections open now: they drop when a busy
		// connection closes, which Prometheus' rate() treats as a reset.
		counter(c.connInBytes, float64(ib))
		counter(c.connOutBytes, float64(ob))
		counter(c.connInMsgs, float64(im))
		counter(c.connOutMsgs, float64(om))
		if ts, ok := cs.(TotalsSource); ok {
			t := ts.Totals()
			counter(c.connsTotal, float64(t.Connections))
			counter(c.srvInBytes, float64(t.InBytes))
			counter(c.srvOutBytes, float64(t.OutBytes))
			counter(c.srvInMsgs, float64(t.InMsgs))
			counter(c.srvOutMsgs, float64(t.OutMsgs))
		}
	}
	b := c.s.opts.Broker()
	if b == nil {
		gauge(c.up, 0)
		return
	}
	gauge(c.up, 1)
	if _, full := b.DiskFull(); full {
		gauge(c.diskFull, 1)
	} else {
		gauge(c.diskFull, 0)
	}
	counter(c.fileLimit, float64(b.FileLimitErrors()))
	gauge(c.openPartitions, float64(b.OpenPartitions()))
	sc := b.ScrubStatus()
	counter(c.scrubBytes, float64(sc.Bytes))
	counter(c.scrubPasses, float64(sc.Passes))
	progress := 1.0
	if sc.PassTotal > 0 {
		progress = min(float64(sc.PassBytes)/float64(sc.PassTotal), 1)
	}
	gauge(c.scrubProgress, progress)
	gauge(c.scrubDamage, float64(len(sc.Damage)))
	for _, d := range b.Damaged() {
		gauge(c.groupDamaged, float64(d.Seq), string(d.Topic), string(d.Group), strconv.FormatUint(uint64(d.Partition), 10))
	}
	for _, t := range b.Topics() {
		ts := topicStats(t)
		counter(c.published, float64(ts.Published), ts.Name)
		gauge(c.retained, float64(ts.Messages), ts.Name)
		gauge(c.unsettled, float64(ts.Unsettled), ts.Name)
		gauge(c.bytes, float64(ts.Bytes), ts.Name)
		for _, p := range ts.Partitions {
			pl := strconv.FormatUint(uint64(p.Partition), 10)
			gauge(c.firstSeq, float64(p.FirstSeq), ts.Name, pl)
			gauge(c.lastSeq, float64(p.LastSeq), ts.Name, pl)
			gauge(c.partBytes, float64(p.DiskBytes), ts.Name, pl)
			gauge(c.partRestored, float64(p.RestoredEvents), ts.Name, pl)
		}
		for _, g := range ts.Groups {
			gauge(c.groupLag, float64(g.Lag), ts.Name, g.Name)
			gauge(c.groupReady, float64(g.Ready), ts.Name, g.Name)
			gauge(c.groupInflight, float64(g.Inflight), ts.Name, g.Name)
			counter(c.groupSettled, float64(g.Settled), ts.Name, g.Name)
			counter(c.groupDelivered, float64(g.Delivered), ts.Name, g.Name)
			counter(c.groupRedelivered, float64(g.Redelivered), ts.Name, g.Name)
			counter(c.groupAcked, float64(g.Acked), ts.Name, g.Name)
			counter(c.groupNacked, float64(g.Nacked), ts.Name, g.Name)
			counter(c.groupRejected, float64(g.Rejected), ts.Name, g.Name)
			counter(c.groupDeadLettered, float64(g.DeadLettered), ts.Name, g.Name)
			counter(c.groupExpired, float64(g.Expired), ts.Name, g.Name)
			gauge(c.groupOldest, float64(g.OldestUnackedMs)/1000, ts.Name, g.Name)
			paused := 0.0
			if g.Paused {
				paused = 1
			}
			gauge(c.groupPaused, paused, ts.Name, g.Name)
		}
	}
}

// newRegistry builds the private registry /metrics serves: the engine
// collector plus the Go runtime and process collectors.
func newRegistry(s *Server) (*prometheus.Registry, error) {
	reg := prometheus.NewRegistry()
	cs := []prometheus.Collector{
		newCollector(s),
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}),
	}
	if s.opts.Sync != nil {
		cs = append(cs, s.opts.Sync.collectors()...)
	}
	if s.opts.Stages != nil {
		cs = append(cs, newStageCollector(s.opts.Stages))
	}
	if s.opts.Cluster != nil {
		cs = append(cs, newClusterCollector(s))
	}
	for _, c := range cs {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	return reg, nil
}
