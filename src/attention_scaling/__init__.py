"""attention-scaling: an interactive explorer of why attention divides its logits by √d_k."""

__version__ = "0.1.0"


def __getattr__(name):
    # Lazy, so that `import attention_scaling.core` does not import Panel.
    if name == "Explorer":
        from .page import Explorer
        return Explorer
    raise AttributeError(f"module 'attention_scaling' has no attribute {name!r}")


__all__ = ["Explorer", "__version__"]
