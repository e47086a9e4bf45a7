package nfsd

import (
	"sync"

	nfs "github.com/willscott/go-nfs"
)

var quietOnce sync.Once

// quiet silences the NFS library's own logger (it prints to stdout, and
// a guest could fill the daemon's log with the errors it provokes: a full
// volume, a stale handle). What matters reaches the guest as NFS errors.
func quiet() { quietOnce.Do(func() { nfs.SetLogger(discard{}) }) }

type discard struct{}

func (discard) SetLevel(nfs.LogLevel)                   {}
func (discard) GetLevel() nfs.LogLevel                  { return nfs.PanicLevel }
func (discard) ParseLevel(string) (nfs.LogLevel, error) { return nfs.PanicLevel, nil }
func (discard) Panic(...interface{})                    {}
func (discard) Fatal(...interface{})                    {}
func (discard) Error(...interface{})                    {}
func (discard) Warn(...interface{})                     {}
func (discard) Info(...interface{})                     {}
func (discard) Debug(...interface{})                    {}
func (discard) Trace(...interface{})                    {}
func (discard) Print(...interface{})                    {}
func (discard) Panicf(string, ...interface{})           {}
func (discard) Fatalf(string, ...interface{})           {}
func (discard) Errorf(string, ...interface{})           {}
func (discard) Warnf(string, ...interface{})            {}
func (discard) Infof(string, ...interface{})            {}
func (discard) Debugf(string, ...interface{})           {}
func (discard) Tracef(string, ...interface{})           {}
func (discard) Printf(string, ...interface{})           {}
