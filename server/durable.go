package server

// Durable bindings (SPEC.md "Durable topics"): placeholder until the engine
// in server/broker is merged; every durable path reports itself unused so the
// plain NATS core serves alone.

import "github.com/fibrilmq/fibril/protocol"

type durableEngine = *durableBinding

// durableBinding will hold the broker engine.
type durableBinding struct{}

// durableSub is a SUB bound to a durable group.
type durableSub interface{ stop() }

func (s *Server) openDurable() error                          { return nil }
func (s *Server) closeDurable()                               {}
func (s *Server) releaseDurable(*client)                      {}
func (s *Server) durableSub(*client, *subscription, int) bool { return false }
func (c *client) publishDurable(*pubMsg) bool                 { return false }
func (c *client) settleByPub(*pubMsg) {
	c.reject(protocol.CodeUnknownHandle, "durable engine not available")
}
func (c *client) handleDurable(cmd *protocol.Command) {
	c.reject(protocol.CodeInternal, cmd.Op.String()+": durable engine not available")
}
