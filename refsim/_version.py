"""refsim's version, in a module of its own so that any module may import it without the
package root (which imports the host, which imports the wire)."""

__version__ = "0.1.0"
