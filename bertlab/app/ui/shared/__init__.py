"""What the tabs share: the error path, forms built from specs, deep links, the model picker."""
