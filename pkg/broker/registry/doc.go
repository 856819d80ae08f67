// Package registry holds the streams a server serves, by name, while they
// come and go at run time: lookups for connections (Get), the set /stats
// and 4404's serves list (List, Names), and the order of the config file
// (Reorder). It is generic over what it holds and safe for concurrent use.
//
// It sits below pkg/broker: broker imports it, and it must never import
// broker or its other sub-packages. It only holds values: it never starts
// or stops what it holds (the caller takes a stream out before stopping
// it, so a connection arriving afterwards finds nothing).
package registry
