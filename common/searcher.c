// placeholder: implemented by the searcher module owner
