"""What a page shows before any markup: one view model per template, figures still integers."""
